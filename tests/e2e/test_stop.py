"""End to end: the Stop button on a draft (Telegram's stopped_message_generation), over the
real bot, the fake Bot API (which delivers the update only to a bot that asked for it, as
Telegram) and the fake LLM streaming slowly (it notices a client that goes away).

Stop mid-answer closes the model's stream at once; what was written so far is stored,
marked as stopped, and sent as the final message; the chat then goes on as usual. In a
consultation the stopped round counts as answered. A stop for no answer in progress is
harmless. The same with the webhook, and with QUEUE=redis (a receiver and a worker that
holds as many updates as it may)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from membot.bot import texts
from membot.core.prompt import STOPPED_NOTE
from membot.memory.redis import RedisRepository
from membot.roles.process import Process
from tests.conftest import RunningBot, StartBot
from tests.e2e.helpers import meta, stored
from tests.e2e.test_drafts import FAST
from tests.e2e.test_stream_intake import queued
from tests.e2e.test_webhook import StartHooked, start_hooked
from tests.fakes import Draft, FakeLLM, FakeTelegram, Pacing, Reply, media_files

__all__ = ["start_hooked"]  # a fixture, used by name

CHAT = 3003
# 20 s of writing if nobody stops it: 500 pieces of 8 characters, 40 ms apart.
SLOW = Pacing(chars=8, first_delay=0.1, delay=0.04)
ANSWER = " ".join(f"step{n}" for n in range(700)) + "."
# The user sees the label as text: the Markdown's italics are entities, not characters.
STOPPED = texts.STOPPED.strip("_")
# The model's stream is closed within a second of the press (on the fake's clock: it notices).
WITHIN = 1.0


async def first_draft(tg: FakeTelegram, chat: int) -> Draft:
    await tg.wait_until(lambda: bool(tg.drafts_to(chat)), what="a draft")
    return tg.drafts_to(chat)[0]


async def press_stop_mid_answer(tg: FakeTelegram, llm: FakeLLM, chat: int = CHAT) -> str:
    """Wait for the answer's first draft, press Stop on it; the final message's text."""
    before = len(tg.messages_to(chat))
    draft = await first_draft(tg, chat)
    assert draft.can_stop
    gone = llm.streams_gone
    tg.press_stop(chat, draft.draft_id)
    await llm.wait_until(lambda: llm.streams_gone == gone + 1, WITHIN, what="the stream closed")
    [final] = (await tg.wait_for_messages(chat, before + 1))[before:]
    assert draft.text and final.text.startswith(draft.text.rstrip())
    # No draft after the final message: it replaced the draft for good.
    assert all(d.at < final.at for d in tg.drafts_to(chat))
    return final.text


def assert_stored_partial(data_dir: Path, final: str, chat: int = CHAT) -> str:
    """The answer stored is what was written so far, marked; the message is it, labelled."""
    answer = stored(data_dir, chat)[-1]
    partial = str(answer["content"])
    assert answer["role"] == "assistant" and answer["stopped"] is True
    assert partial and ANSWER.startswith(partial) and len(partial) < len(ANSWER) // 2
    assert final == f"{partial}\n\n{STOPPED}"
    return partial


async def test_stop_mid_answer_stores_and_sends_what_was_written(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    assert tg.allowed_updates is not None and "stopped_message_generation" in tg.allowed_updates
    llm.script(Reply(content=ANSWER, pacing=SLOW))
    tg.push_text(CHAT, "plan my year")
    partial = assert_stored_partial(data_dir, await press_stop_mid_answer(tg, llm))
    assert [m["role"] for m in stored(data_dir, CHAT)] == ["user", "assistant"]
    assert tg.not_delivered == [] and tg.pending_updates() == 0

    # The chat goes on; the model sees the stopped answer as stopped.
    llm.script(Reply(content="Sure, a shorter plan.", pacing=SLOW))
    tg.push_text(CHAT, "shorter please")
    [answer] = (await tg.wait_for_messages(CHAT, 2))[1:]
    assert answer.text == "Sure, a shorter plan."
    shown = llm.chat_requests[-1]["messages"]
    assert shown[-2] == {"role": "assistant", "content": f"{partial} {STOPPED_NOTE}"}
    assert [m.get("stopped", False) for m in stored(data_dir, CHAT)] == [False, True, False, False]


async def test_a_stopped_consultation_round_counts_as_answered(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    llm.script(Reply(content=ANSWER, pacing=SLOW))
    tg.push_text(CHAT, "/consult 3 plan my training")
    final = await press_stop_mid_answer(tg, llm)
    round_one = "\n\n" + texts.ROUND.format(round=1, max_rounds=3).strip("_")
    assert final.endswith(round_one)
    assert_stored_partial(data_dir, final.removesuffix(round_one))
    assert meta(data_dir, CHAT)["state"]["round"] == 1
    llm.script(Reply(content="How many days a week?"))
    tg.push_text(CHAT, "strength, mostly")
    [answer] = (await tg.wait_for_messages(CHAT, 2))[1:]
    round_two = texts.ROUND.format(round=2, max_rounds=3).strip("_")
    assert answer.text == f"How many days a week?\n\n{round_two}"


async def test_a_stop_before_the_model_wrote_anything_sends_the_label_alone(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    """A voice's draft shows what was heard before the model writes: Stop is there already."""
    await start_bot()
    llm.script_transcription("Plan my week, please.")
    llm.script(Reply(content=ANSWER, pacing=SLOW))
    llm.gate = asyncio.Event()  # the model's answer never starts
    tg.push_voice(CHAT, data=media_files.ogg_voice(2.0), duration=2)
    await llm.wait_for_in_flight(1)
    draft = await first_draft(tg, CHAT)
    assert draft.text == "Plan my week, please." and draft.can_stop
    tg.press_stop(CHAT, draft.draft_id)
    [final] = await tg.wait_for_messages(CHAT, 1)
    assert final.text == f"Plan my week, please.\n\n{STOPPED}"
    await llm.wait_until(lambda: llm.in_flight == 0, WITHIN, what="the model's call ended")
    [user, answer] = stored(data_dir, CHAT)
    assert user["content"] == "Plan my week, please."
    assert (answer["content"], answer["stopped"]) == ("", True)


async def test_a_stop_for_no_answer_in_progress_is_harmless(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(drafts=FAST)  # about Stop, not the pacing
    tg.push_stop(CHAT, 12345)  # nothing is being written
    llm.script(Reply(content="All well.", pacing=Pacing(chars=8, delay=0.01)))
    tg.push_text(CHAT, "hello")
    [answer] = await tg.wait_for_messages(CHAT, 1)
    # A stop for another draft than the one being written does not touch it either.
    assert answer.text == "All well."
    assert [m.get("stopped", False) for m in stored(data_dir, CHAT)] == [False, False]
    short = ANSWER[:1000] + "."  # 1 s of writing
    llm.script(Reply(content=short, pacing=Pacing(chars=8, first_delay=0.1, delay=0.008)))
    tg.push_text(CHAT, "plan my year")
    draft = await first_draft(tg, CHAT)
    tg.push_stop(CHAT, draft.draft_id + 1)
    tg.push_stop(CHAT + 1, draft.draft_id)
    [answer] = (await tg.wait_for_messages(CHAT, 2))[1:]
    assert answer.text == short and llm.streams_gone == 0
    assert tg.errors == [] and tg.pending_updates() == 0


async def test_stop_through_the_webhook(
    tg: FakeTelegram, llm: FakeLLM, start_hooked: StartHooked, data_dir: Path
) -> None:
    await start_hooked()
    assert tg.allowed_updates is not None and "stopped_message_generation" in tg.allowed_updates
    llm.script(Reply(content=ANSWER, pacing=SLOW))
    tg.push_text(CHAT, "plan my year")
    assert_stored_partial(data_dir, await press_stop_mid_answer(tg, llm))


@pytest.mark.parametrize("roles", ["run", "receive+worker"])
async def test_stop_with_the_redis_stream(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    redis_repo: RedisRepository,
    roles: str,
) -> None:
    """The worker holds one update at a time: the turn to stop is it. (A stop read from the
    chat's stream would wait behind it; it comes by pub/sub, intake/controls.py.)"""
    settings: dict[str, Any] = queued(redis_repo, worker_concurrency=1)
    worker: RunningBot | None = None
    if roles == "run":
        await start_bot(**settings)
    else:
        receiver = await start_bot(**settings)
        app = Process(receiver.app.settings, "worker")
        worker = RunningBot(app, asyncio.create_task(app.run(handle_signals=False)))
        await receiver.stop()  # polling continues from a receive-only process
        polls = tg.call_count("getUpdates")
        receive = Process(receiver.app.settings, "receive")
        receiving = RunningBot(receive, asyncio.create_task(receive.run(handle_signals=False)))
        await tg.wait_for_call("getUpdates", count=polls + 1)
    try:
        llm.script(Reply(content=ANSWER, pacing=SLOW))
        tg.push_text(CHAT, "plan my year")
        final = await press_stop_mid_answer(tg, llm)
        answer = (await redis_repo.tail(_cid(), 1))[-1]
        assert answer.stopped and final == f"{answer.content}\n\n{STOPPED}"
        assert answer.content and ANSWER.startswith(answer.content)
    finally:
        if worker is not None:
            await receiving.stop()
            await worker.stop()


def _cid() -> Any:
    from membot.ids import ConversationId

    return ConversationId.telegram(CHAT)
