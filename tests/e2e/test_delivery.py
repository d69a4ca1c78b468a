"""Answers stored but not sent, with real processes: `python -m membot run` is killed with
kill -9 while sendMessage waits out Telegram's flood control (a 429 with a long retry_after),
after the answer is in the archive. The restarted bot, with no new message, sends it within
20 s: once, in order, without asking the model again; a long answer cut after its first
message is resumed after it; a user who blocked the bot meanwhile is logged and given up;
with Redis (STORAGE=redis, QUEUE=redis) two workers starting at once send it once."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from redis.asyncio import Redis

from membot.bot.render import render
from membot.memory.contract.delivery import DeliveryMark
from membot.memory.files.delivery import read_mark
from tests.conftest import bot_env
from tests.e2e.helpers import roles_and_texts
from tests.e2e.processes import Runs
from tests.fakes import FakeLLM, FakeTelegram, Reply

CHAT = 2401
REDIS_URL = "redis://127.0.0.1:6379/0"
FLOOD = "Too Many Requests: retry after 600"
# The restarted process sends what was left within this long of its start.
PROMPTLY = 20.0


def env_for(tg: FakeTelegram, llm: FakeLLM, data_dir: Path, **extra: str) -> dict[str, str]:
    return bot_env(tg, llm, data_dir, log_level="INFO", **extra)


def answered(data_dir: Path, text: str) -> Callable[[], bool]:
    return lambda: ("assistant", text) in roles_and_texts(data_dir, CHAT)


def pending(data_dir: Path) -> DeliveryMark | None:
    """What the chat's delivery record says is left to send (None: nothing), as the
    restarted bot reads it."""
    return read_mark(data_dir / str(CHAT))


def texts_to(tg: FakeTelegram) -> list[str]:
    return [m.text for m in tg.messages_to(CHAT)]


def flood_waiting(runs: Runs) -> Callable[[], bool]:
    """The bot has taken Telegram's 429 and waits: it logs so after recording that the
    message's request is no longer out. Killed before that (the fake has answered, the bot
    not yet read it), the message counts as maybe sent and is rightly not sent again."""
    return lambda: "Telegram flood control for chat" in runs.log()


async def test_an_answer_stored_during_a_flood_wait_is_sent_once_after_a_kill(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    """The first answer waits out a 10-minute flood-wait when the process is killed; the
    second question waits behind it. After the restart, with no new message: the first
    answer within 20 s, then the second question's, each once, in order; the model was
    asked the first question once, and the second once."""
    runs = Runs(tmp_path, env_for(tg, llm, data_dir))
    llm.script(Reply(content="First answer."), Reply(content="Second answer."))
    tg.fail_next("sendMessage", 429, FLOOD, chat_id=CHAT)
    try:
        first = await runs.spawn("run")
        tg.push_text(CHAT, "first question")
        await runs.until("the first answer stored", answered(data_dir, "First answer."))
        await runs.until("the flood-wait", flood_waiting(runs))
        tg.push_text(CHAT, "second question")
        await runs.until("the second question received", lambda: tg.pending_updates() == 0)
        await runs.kill(first)
        assert texts_to(tg) == []
        assert len(llm.chat_requests) == 1

        second = await runs.spawn("run")
        started = await runs.wait_started("run", 2)
        await runs.until("the stored answer sent", lambda: bool(texts_to(tg)), PROMPTLY)
        assert time.monotonic() - started < PROMPTLY
        await runs.until("the second answer", lambda: len(texts_to(tg)) >= 2)
        await runs.stop(second)
    finally:
        runs.close()
    assert texts_to(tg) == ["First answer.", "Second answer."]
    # The first answer was not asked for again: one request per question.
    assert len(llm.chat_requests) == 2
    assert "second question" in str(llm.chat_requests[1]["messages"][-1]["content"])
    assert roles_and_texts(data_dir, CHAT) == [
        ("user", "first question"),
        ("assistant", "First answer."),
        ("user", "second question"),
        ("assistant", "Second answer."),
    ]
    assert pending(data_dir) is None
    assert "Traceback" not in runs.log()


async def test_a_long_answer_cut_after_its_first_message_is_resumed_after_it(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    """An answer of three messages: Telegram took the first, the second waits out a
    flood-wait when the process is killed. The restart sends the second and the third:
    the user has each message once."""
    long = "\n\n".join(f"Paragraph {i}: " + "word " * 300 for i in range(6))
    parts = [p.text for p in render(long)]
    assert len(parts) == 3
    runs = Runs(tmp_path, env_for(tg, llm, data_dir))
    llm.script(Reply(content=long))
    tg.fail_next("sendMessage", 429, FLOOD, chat_id=CHAT, after=1)
    try:
        first = await runs.spawn("run")
        tg.push_text(CHAT, "tell me a lot")
        await runs.until("the first message sent", lambda: len(texts_to(tg)) == 1)
        # The second's request came back refused: it is known not to have been sent.
        progress = DeliveryMark(after=0, seq=2, parts=1)
        await runs.until("its progress kept", lambda: pending(data_dir) == progress)
        await runs.kill(first)
        second = await runs.spawn("run")
        await runs.wait_started("run", 2)
        await runs.until("the rest sent", lambda: len(texts_to(tg)) >= 3, PROMPTLY)
        await runs.until("nothing left to send", lambda: pending(data_dir) is None)
        await runs.stop(second)
    finally:
        runs.close()
    assert texts_to(tg) == parts
    assert len(llm.chat_requests) == 1


async def test_a_user_who_blocked_the_bot_is_logged_and_given_up(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    """The answer left unsent, and meanwhile the user blocked the bot: the restart's one try
    is refused (403), logged at WARNING with the chat id and without the answer, and given
    up: no second try, no mark left to try again at the next start."""
    runs = Runs(tmp_path, env_for(tg, llm, data_dir))
    llm.script(Reply(content="Private words for you."))
    tg.fail_next("sendMessage", 429, FLOOD, chat_id=CHAT)
    try:
        first = await runs.spawn("run")
        tg.push_text(CHAT, "a question")
        await runs.until("the answer stored", answered(data_dir, "Private words for you."))
        await runs.until("the flood-wait", flood_waiting(runs))
        await runs.kill(first)
        assert pending(data_dir) is not None
        tg.fail_next("sendMessage", 403, "Forbidden: bot was blocked by the user", chat_id=CHAT)
        tries = tg.call_count("sendMessage")
        second = await runs.spawn("run")
        await runs.wait_started("run", 2)
        await runs.until("the answer given up", lambda: pending(data_dir) is None, PROMPTLY)
        await runs.stop(second)
    finally:
        runs.close()
    assert texts_to(tg) == []
    assert tg.call_count("sendMessage") == tries + 1
    log = runs.log()
    [warning] = [line for line in log.splitlines() if "given up" in line]
    assert " WARNING " in warning and f"chat {CHAT}" in warning and "Forbidden" in warning
    assert "Private words" not in log


async def test_with_redis_two_workers_send_a_stored_answer_once(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    """STORAGE=redis, QUEUE=redis: `membot run` killed during the flood-wait; two workers
    started at once after it, each looking for unsent answers: the user gets it once."""
    prefix = f"membot-test:{uuid.uuid4().hex}:"
    env = env_for(
        tg,
        llm,
        data_dir,
        storage="redis",
        queue="redis",
        redis_url=REDIS_URL,
        redis_prefix=prefix,
        claim_idle="2",
    )
    runs = Runs(tmp_path, env)
    llm.script(Reply(content="Kept in Redis."))
    # Short: the pause is shared through Redis, so the restarted workers wait out its rest.
    tg.fail_next("sendMessage", 429, "Too Many Requests: retry after 4", chat_id=CHAT)
    client = Redis.from_url(REDIS_URL, decode_responses=True)
    key = f"{prefix}conv:tg:{CHAT}:messages"
    stored: list[str] = []

    async def poll_stored() -> bool:
        stored[:] = await client.zrange(key, 0, -1)
        return any(json.loads(line)["content"] == "Kept in Redis." for line in stored)

    try:
        first = await runs.spawn("run")
        tg.push_text(CHAT, "remember this")
        deadline = time.monotonic() + 60
        while not await poll_stored():
            assert time.monotonic() < deadline, runs.log()
            await asyncio.sleep(0.05)
        await runs.until("the flood-wait", flood_waiting(runs))
        await runs.kill(first)
        assert await client.hkeys(f"{prefix}undelivered:tg") == [str(CHAT)]
        # Each its own DATA_DIR, as on its own host.
        workers = await asyncio.gather(
            *(runs.spawn("worker", DATA_DIR=str(tmp_path / f"data-{n}")) for n in range(2))
        )
        await runs.wait_started("worker", 1)
        await runs.until("the stored answer sent", lambda: bool(texts_to(tg)), PROMPTLY)
        await runs.wait_started("worker", 2)  # and it too has looked for unsent answers
        deadline = time.monotonic() + 30
        while await client.hkeys(f"{prefix}undelivered:tg"):
            assert time.monotonic() < deadline, runs.log()
            await asyncio.sleep(0.05)
        for worker in workers:
            await runs.stop(worker)
    finally:
        runs.close()
        keys = [k async for k in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()
    assert texts_to(tg) == ["Kept in Redis."]
    assert len(llm.chat_requests) == 1
