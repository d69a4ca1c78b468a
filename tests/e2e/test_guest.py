"""End to end: Guest Mode (Bot API 10.0) over the real bot, the fake Bot API (which delivers a
guest_message only to a bot that asked for it, takes one answerGuestQuery per query within
30 s and records it) and the fake LLM.

A user calls the bot into a group it is not in: the answer comes from their private chat's
memory, goes out once with answerGuestQuery, and the question and answer are kept in the
private chat, marked as asked elsewhere. A caller with no private chat, one not allowed and
one over budget get one short line and no model call. A turn past GUEST_DEADLINE is cut and
what was written is sent. With QUEUE=redis the guest message goes through the stream, once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from membot.bot import texts
from membot.bot.guest import LINE_CHARS
from membot.ids import ConversationId
from membot.memory.redis import RedisRepository
from tests.conftest import StartBot
from tests.e2e.helpers import stored
from tests.e2e.test_drafts import FAST
from tests.e2e.test_stream_intake import queued, stream_lengths
from tests.e2e.test_tools import native_call
from tests.e2e.test_webhook import StartHooked, start_hooked
from tests.fakes import FakeLLM, FakeTelegram, Pacing, Reply, without_now

__all__ = ["start_hooked"]  # a fixture, used by name

CALLER = 5005
GROUP = -5100
EN = texts.EN
FACT = "I owe Anna 50 euros, to pay back on Friday"
# 20 s of writing if nothing cuts it: 400 pieces of 8 characters, 50 ms apart.
SLOW = Pacing(chars=8, first_delay=0.1, delay=0.05)
LONG = " ".join(f"word{n}" for n in range(640)) + "."


async def private_fact(tg: FakeTelegram, llm: FakeLLM) -> None:
    """The caller's private chat with the bot, where they asked it to keep FACT."""
    llm.script(
        Reply(content=None, tool_calls=[native_call("remember", {"fact": FACT})]),
        Reply(content="Noted."),
    )
    tg.push_text(CALLER, f"remember: {FACT}")
    [noted] = await tg.wait_for_messages(CALLER, 1)
    assert noted.text == "Noted."


async def test_a_guest_query_is_answered_from_the_callers_private_memory(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(drafts=FAST)
    assert tg.allowed_updates is not None and "guest_message" in tg.allowed_updates
    await private_fact(tg, llm)
    calls = len(llm.chat_requests)

    llm.script(Reply(content="You promised to pay Anna back **on Friday**."))
    query = tg.push_guest(GROUP, "when did I promise Anna the money back?", user_id=CALLER)
    answer = await tg.wait_for_guest_answer(query)

    # Posted once, in the group, with its formatting; nothing sent to either chat otherwise.
    assert answer.chat_id == GROUP
    assert answer.text == "You promised to pay Anna back on Friday."
    assert answer.entities == [{"type": "bold", "offset": 30, "length": 9}]
    assert tg.messages_to(GROUP) == [] and len(tg.messages_to(CALLER)) == 1
    # The caller's memory reached the model: the fact, and the private chat's window.
    [request] = llm.chat_requests[calls:]
    assert FACT in request["messages"][0]["content"]
    shown = [without_now(str(m.get("content"))) for m in request["messages"][1:]]
    assert any(FACT in text for text in shown[:-1])
    asked = shown[-1]
    assert "Guest Mode" in asked and "Group -5100" in asked
    assert asked.endswith("when did I promise Anna the money back?")

    # Kept in the private chat, the question marked with the query, the answer after it.
    question, reply = stored(data_dir, CALLER)[-2:]
    assert question["role"] == "user" and question["guest"] == query
    assert question["content"] == asked and "tg_message_id" not in question
    assert reply["role"] == "assistant" and reply["content"].startswith("You promised")
    assert "delivery" not in reply  # never sent to the private chat
    # The private chat knows it happened: its next prompt shows the guest exchange.
    tg.push_text(CALLER, "what did I just ask you in the group?")
    await tg.wait_for_messages(CALLER, 2)
    window = [without_now(str(m.get("content"))) for m in llm.chat_requests[-1]["messages"]]
    assert asked in window and "You promised to pay Anna back **on Friday**." in window
    assert not any(method == "answerGuestQuery" for method, _ in tg.errors)


async def test_a_caller_without_a_private_chat_gets_one_line(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    query = tg.push_guest(GROUP, "what do you know about me?", user_id=CALLER)
    answer = await tg.wait_for_guest_answer(query)
    assert answer.text == EN.GUEST_NO_CHAT.format(bot="membot_test_bot")
    assert "\n" not in answer.text and len(answer.text) <= LINE_CHARS
    assert llm.requests == []  # no model call
    assert stored(data_dir, CALLER) == [] and not (data_dir / str(CALLER)).exists()


async def test_a_caller_not_allowed_gets_one_line(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(allowed_user_ids="777")
    query = tg.push_guest(GROUP, "hi", user_id=CALLER, language_code="ru")
    answer = await tg.wait_for_guest_answer(query)
    assert answer.text == texts.RU.NOT_ALLOWED and len(answer.text) <= LINE_CHARS
    assert llm.requests == []
    assert not (data_dir / str(CALLER)).exists()


async def test_a_caller_over_budget_gets_one_line(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    llm.cost_per_call = "1"
    await start_bot(user_daily_budget="0.5")
    tg.push_text(CALLER, "hello there, how are you today?")
    await tg.wait_for_messages(CALLER, 1)
    calls, kept = len(llm.requests), stored(data_dir, CALLER)

    query = tg.push_guest(GROUP, "and now?", user_id=CALLER)
    answer = await tg.wait_for_guest_answer(query)
    assert answer.text.startswith("You've reached your daily budget.")
    assert "\n" not in answer.text and len(answer.text) <= LINE_CHARS
    assert len(llm.requests) == calls and stored(data_dir, CALLER) == kept


async def test_a_turn_past_the_deadline_is_cut_and_what_was_written_is_sent(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    deadline = 4.0
    await start_bot(drafts=FAST, guest_deadline=str(deadline))
    tg.push_text(CALLER, "hello there, how are you today?")
    await tg.wait_for_messages(CALLER, 1)

    llm.script(Reply(content=LONG, pacing=SLOW))
    query = tg.push_guest(GROUP, "tell me everything", user_id=CALLER)
    answer = await tg.wait_for_guest_answer(query, timeout=deadline + 20)
    # Cut at the deadline (the message's date is in whole seconds: up to one earlier), well
    # within Telegram's 30 s, the model's stream closed.
    assert deadline - 1.5 < answer.after < deadline + 10
    await llm.wait_until(lambda: llm.streams_gone == 1, what="the stream closed")
    cut = texts.EN.GUEST_CUT.strip("_")
    partial = stored(data_dir, CALLER)[-1]
    assert partial["role"] == "assistant" and partial["stopped"] is True
    written = partial["content"]
    assert written and LONG.startswith(written) and len(written) < len(LONG) // 2
    assert answer.text == f"{written}\n\n{cut}"
    assert stored(data_dir, CALLER)[-2]["guest"] == query


async def test_a_guest_turn_waits_for_the_private_answer_in_progress(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(drafts=FAST)
    tg.push_text(CALLER, "hello there, how are you today?")
    await tg.wait_for_messages(CALLER, 1)
    llm.script(Reply(content="A slow private answer."))
    llm.gate = asyncio.Event()  # the private answer is being written until the gate opens
    tg.push_text(CALLER, "write slowly")
    await llm.wait_for_in_flight(1)
    query = tg.push_guest(GROUP, "quick question", user_id=CALLER)
    await tg.wait_until(lambda: tg.pending_updates() == 0, what="the guest message taken")
    llm.gate.set()
    answer = await tg.wait_for_guest_answer(query)
    assert llm.max_in_flight == 1  # never side by side
    [_, private] = await tg.wait_for_messages(CALLER, 2)
    assert private.text == "A slow private answer."
    # One turn after the other: the guest turn saw the private answer, stored before it.
    roles = [(m["role"], m.get("guest")) for m in stored(data_dir, CALLER)]
    assert roles[-4:] == [("user", None), ("assistant", None), ("user", query), ("assistant", None)]
    assert "A slow private answer." in str(llm.chat_requests[-1]["messages"])
    assert answer.text.startswith("ANSWER: [Asked through Guest Mode")


async def test_with_the_redis_stream_a_guest_message_is_answered_once(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, redis_repo: RedisRepository
) -> None:
    bot = await start_bot(**queued(redis_repo))
    assert tg.allowed_updates is not None and "guest_message" in tg.allowed_updates
    tg.push_text(CALLER, "hello there, how are you today?")
    await tg.wait_for_messages(CALLER, 1)
    llm.script(Reply(content="From your memory."))
    query = tg.push_guest(GROUP, "what do you know?", user_id=CALLER)
    answer = await tg.wait_for_guest_answer(query)
    assert answer.text == "From your memory."
    await bot.stop()  # every update in hand finished and acknowledged
    assert await stream_lengths(redis_repo) == 0
    kept = await redis_repo.tail(ConversationId.telegram(CALLER), 10)
    assert [(m.role, m.guest) for m in kept] == [
        ("user", None),
        ("assistant", None),
        ("user", query),
        ("assistant", None),
    ]
    assert len(tg.guest_answers) == 1 and tg.errors == []


async def test_a_guest_chat_sharing_another_chats_id_never_reaches_its_memory(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    """Called into a private chat with Anna, whose id is also Anna's own private chat with
    the bot: the answer comes from the caller's memory, and Anna's is neither read nor
    written."""
    anna = 6006
    await start_bot(drafts=FAST)
    llm.script(
        Reply(content=None, tool_calls=[native_call("remember", {"fact": "Anna's PIN is 4321"})]),
        Reply(content="Noted."),
    )
    tg.push_text(anna, "remember my PIN", first_name="Anna")
    await tg.wait_for_messages(anna, 1)
    await private_fact(tg, llm)
    annas = stored(data_dir, anna)

    query = tg.push_guest(anna, "what is the PIN?", user_id=CALLER, chat_type="private")
    await tg.wait_for_guest_answer(query)
    prompt = str(llm.chat_requests[-1]["messages"])
    assert "4321" not in prompt and FACT in prompt
    assert stored(data_dir, anna) == annas and tg.messages_to(anna)[1:] == []
    assert stored(data_dir, CALLER)[-2]["guest"] == query


async def test_through_the_webhook(
    tg: FakeTelegram, llm: FakeLLM, start_hooked: StartHooked, data_dir: Path
) -> None:
    await start_hooked()
    assert tg.allowed_updates is not None and "guest_message" in tg.allowed_updates
    await private_fact(tg, llm)
    llm.script(Reply(content="On Friday."))
    query = tg.push_guest(GROUP, "when do I pay Anna back?", user_id=CALLER)
    assert (await tg.wait_for_guest_answer(query)).text == "On Friday."
    assert stored(data_dir, CALLER)[-2]["guest"] == query


async def test_what_the_guest_message_replies_to_reaches_the_model(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(drafts=FAST)
    await private_fact(tg, llm)
    tg.push_text(GROUP, "You still owe me for the concert!", user_id=6006, first_name="Anna")
    quoted = 1  # the group's first message
    llm.script(Reply(content="50 euros, by Friday."))
    query = tg.push_guest(GROUP, "how much is it?", user_id=CALLER, reply_to=quoted)
    assert (await tg.wait_for_guest_answer(query)).text == "50 euros, by Friday."
    asked = without_now(str(llm.chat_requests[-1]["messages"][-1]["content"]))
    assert "[Replying to Anna: You still owe me for the concert!]" in asked
    assert asked.endswith("how much is it?")


async def test_a_model_failure_is_one_line_and_nothing_is_stored(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(drafts=FAST)
    await private_fact(tg, llm)
    kept = stored(data_dir, CALLER)
    llm.script(Reply(status=500, error_message="upstream failed"))
    query = tg.push_guest(GROUP, "when?", user_id=CALLER)
    assert (await tg.wait_for_guest_answer(query)).text == EN.LLM_FAILED
    assert stored(data_dir, CALLER) == kept


async def test_a_query_whose_turn_comes_past_its_deadline_gets_one_line(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(drafts=FAST, guest_deadline="2")
    tg.push_text(CALLER, "hello there, how are you today?")
    await tg.wait_for_messages(CALLER, 1)
    # The private answer takes longer than the guest query may wait (simulated latency).
    llm.script(Reply(content="A slow private answer.", delay=4.0))
    tg.push_text(CALLER, "take your time")
    await llm.wait_for_in_flight(1)
    calls = len(llm.requests)
    query = tg.push_guest(GROUP, "quick question", user_id=CALLER)
    answer = await tg.wait_for_guest_answer(query)
    assert answer.text == EN.GUEST_TOO_LATE and answer.after > 2
    assert len(llm.requests) == calls  # no model call for it
    assert [m.get("guest") for m in stored(data_dir, CALLER)] == [None] * 4


async def test_an_answer_longer_than_a_message_is_cut_and_kept_whole(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(drafts=FAST)
    await private_fact(tg, llm)
    long = "\n\n".join(f"Paragraph {n}: " + "words " * 60 for n in range(30))
    llm.script(Reply(content=long))
    query = tg.push_guest(GROUP, "tell me all", user_id=CALLER)
    answer = await tg.wait_for_guest_answer(query)
    assert answer.text.endswith("…") and len(answer.text) <= 4096
    assert answer.text.startswith("Paragraph 0: words")
    assert stored(data_dir, CALLER)[-1]["content"] == long.strip()
