"""/forget end to end over the fakes, on files and on Redis: the matches shown with a button,
erased once the one who asked confirms, and then looked for everywhere (the archive, the
search, the summary, the facts, the next prompt, every file under DATA_DIR, every Redis key
of the test); the next turn goes on. In a group a member cannot forget another's messages,
nor confirm another's request. The model's forget_messages asks the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from membot.bot.texts import forget as forget_texts
from membot.ids import ConversationId
from membot.memory import ChatRepository, FileRepository
from membot.memory.redis import RedisRepository
from membot.search import HistorySearch
from tests.conftest import StartBot
from tests.e2e.test_redis_e2e import on_redis
from tests.e2e.test_tools import native_call
from tests.fakes import FakeLLM, FakeTelegram, Reply

CHAT = 7007
GROUP = -7100
SECRET = "hunter2swordfish"
EN = forget_texts.EN
# Summaries early: the second covers the secret's turn, the first does not.
SMALL = {"window_size": 4, "summary_every": 2}


async def say(tg: FakeTelegram, chat: int, text: str, **kw: Any) -> str:
    before = len(tg.messages_to(chat))
    if chat < 0 and not text.startswith("/"):
        tg.push_mention(chat, text, **kw)
    else:
        tg.push_text(chat, text, **kw)
    return (await tg.wait_for_messages(chat, before + 1, timeout=20))[before].text


def buttons(tg: FakeTelegram, chat: int) -> list[tuple[str, str]]:
    markup = tg.messages_to(chat)[-1].params["reply_markup"]
    return [(b["text"], b["callback_data"]) for row in markup["inline_keyboard"] for b in row]


async def press(tg: FakeTelegram, chat: int, data: str, **kw: Any) -> dict[str, Any]:
    """Press a button under the bot's last message; Telegram's answer to the press."""
    answers = len(tg.callback_answers)
    tg.push_callback(chat, tg.messages_to(chat)[-1].message_id, data, **kw)
    await tg.wait_until(lambda: len(tg.callback_answers) > answers, what="the button's answer")
    return tg.callback_answers[-1]


def summaries_quote_everything(llm: FakeLLM) -> None:
    """A summary that keeps every word of what it summarizes (the secret included)."""

    def reply(body: dict[str, Any]) -> Reply:
        if any(b is body for b in llm.summary_requests):
            return Reply(content="SUMMARY: " + body["messages"][-1]["content"][-300:])
        return llm.default_reply(body)

    llm.set_responder(reply)


async def everything_stored(data_dir: Path, redis: RedisRepository | None) -> str:
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    found = [p.read_bytes().decode("utf-8", "replace") for p in files]
    if redis is not None:
        client = redis.client
        async for key in client.scan_iter(match=f"{redis.prefix}*"):
            kind = await client.type(key)
            if kind == "string":
                found.append(str(await client.get(key)))
            elif kind == "zset":
                found += await client.zrange(key, 0, -1)
            elif kind == "list":
                found += await client.lrange(key, 0, -1)
            elif kind == "hash":
                found += [f"{k}={v}" for k, v in (await client.hgetall(key)).items()]
            elif kind == "set":
                found += await client.smembers(key)
            elif kind == "stream":
                found += [json.dumps(e) for e in await client.xrange(key)]
    return "\n".join(found)


@pytest.mark.parametrize("backend", ["files", "redis"])
async def test_forget_shows_confirms_and_leaves_nothing_anywhere(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    data_dir: Path,
    redis_repo: RedisRepository,
    backend: str,
) -> None:
    storage = on_redis(redis_repo) if backend == "redis" else {}
    await start_bot(**SMALL, **storage)
    summaries_quote_everything(llm)
    repo: ChatRepository = redis_repo if backend == "redis" else FileRepository(data_dir)
    cid = ConversationId.telegram(CHAT)
    await say(tg, CHAT, "hello there")
    llm.script(
        Reply(tool_calls=[native_call("remember", {"fact": f"Password: {SECRET}"}, "c1")]),
        Reply(content="Noted."),
    )
    await say(tg, CHAT, f"my password is {SECRET}, remember it")
    for text in ("the weather is fine", "tell me a joke", "thanks a lot"):
        await say(tg, CHAT, text)
    await llm.wait_until(lambda: len(llm.summary_requests) >= 2, timeout=20, what="2 summaries")
    await llm.wait_until(lambda: llm.in_flight == 0, timeout=20, what="summaries saved")
    assert SECRET in await repo.get_summary(cid)
    assert SECRET in await everything_stored(data_dir, redis_repo)

    listing = await say(tg, CHAT, f"/forget {SECRET}")
    # The question, the remember call holding the words and its result; the fact.
    assert listing.startswith(EN.FOUND.format(messages=3, facts=1))
    assert f"· Alice: my password is {SECRET}" in listing  # shown with its date
    assert listing.count(SECRET) == 2  # the question and the fact: tool plumbing is counted
    (yes, yes_data), (no, _) = buttons(tg, CHAT)
    assert (yes, no) == (EN.BUTTON_YES, EN.BUTTON_NO)
    await press(tg, CHAT, yes_data)
    await tg.wait_until(lambda: bool(tg.edits), what="the list replaced")
    assert tg.edits[-1]["text"] == EN.DONE.format(messages=3, facts=1)

    messages = [m async for m in repo.iter_messages(cid)]
    assert len(messages) == 12  # every slot kept
    assert sum(m.forgotten for m in messages) == 3
    assert not any(SECRET in m.to_json() for m in messages)
    assert await repo.get_facts(cid) == []
    assert SECRET not in await repo.get_summary(cid)
    assert (await repo.get_meta(cid)).summarized_upto == 2  # the summary before it, again
    search = HistorySearch(repo, data_dir)
    assert await search.search(cid, SECRET) == []
    assert SECRET not in await everything_stored(data_dir, redis_repo)

    answer = await say(tg, CHAT, "what did I tell you before?")
    assert answer == "ANSWER: what did I tell you before?"
    assert SECRET not in json.dumps(llm.chat_requests[-1])
    assert SECRET not in await everything_stored(data_dir, redis_repo)


async def test_a_member_forgets_only_their_own_and_only_they_confirm(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    tg.set_admins(GROUP, [700])
    ann, bob = {"user_id": 555, "first_name": "Ann"}, {"user_id": 556, "first_name": "Bob"}
    await say(tg, GROUP, "my code is zebra42", **ann)
    await say(tg, GROUP, "hello all", **bob)
    # Bob's /forget finds nothing of his: Ann's message and the bot's answer to her are hers.
    assert await say(tg, GROUP, "/forget zebra42", **bob) == EN.NONE
    listing = await say(tg, GROUP, "/forget zebra42", **ann)
    assert listing.startswith(EN.FOUND.format(messages=2, facts=0))
    yes_data = buttons(tg, GROUP)[0][1]
    refused = await press(tg, GROUP, yes_data, **bob)
    assert (refused["text"], str(refused.get("show_alert"))) == (EN.NOT_YOURS, "true")
    await press(tg, GROUP, yes_data, **ann)
    await tg.wait_until(lambda: bool(tg.edits), what="the list replaced")
    assert tg.edits[-1]["text"] == EN.DONE.format(messages=2, facts=0)
    stored = (data_dir / str(GROUP) / "messages.txt").read_text()
    assert "zebra42" not in stored and "hello all" in stored
    # An administrator forgets anyone's.
    admin = {"user_id": 700, "first_name": "Ada"}
    assert (await say(tg, GROUP, "/forget hello all", **admin)).startswith(
        EN.FOUND.format(messages=2, facts=0)
    )


async def test_the_models_forget_messages_asks_the_user_to_confirm(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    await say(tg, CHAT, f"my card is {SECRET}")
    llm.script(
        Reply(tool_calls=[native_call("forget_messages", {"words": SECRET}, "f1")]),
        Reply(content="I found it; please confirm below."),
    )
    before = len(tg.messages_to(CHAT))
    tg.push_text(CHAT, "please erase my card number from your memory")
    sent = await tg.wait_for_messages(CHAT, before + 2, timeout=20)
    assert sent[before].text == "I found it; please confirm below."
    assert sent[before + 1].text.startswith(EN.FOUND.format(messages=2, facts=0))
    result = next(m for m in llm.chat_requests[-1]["messages"] if m["role"] == "tool")
    assert "asked to confirm" in result["content"] and SECRET not in result["content"]
    await press(tg, CHAT, buttons(tg, CHAT)[0][1])
    await tg.wait_until(lambda: bool(tg.edits), what="the list replaced")
    # What was found, and the request to the model itself (its call holds the words).
    assert tg.edits[-1]["text"] == EN.DONE.format(messages=4, facts=0)
    assert SECRET not in "".join(p.read_text("utf-8", "replace") for p in data_dir.rglob("*.*"))


async def test_the_memory_screens_forget_button_says_how(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    await say(tg, CHAT, "hello")
    await press(tg, CHAT, "memory:forget")
    await tg.wait_until(lambda: tg.messages_to(CHAT)[-1].text == EN.HOW, what="how to forget")
