"""End to end: a user talks to the real bot (real polling loop, real files) over the fakes."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from membot.bot import texts
from membot.core.prompt import NO_HISTORY, WITH_HISTORY
from tests.conftest import TOKEN, RunningBot, StartBot
from tests.e2e.helpers import (
    HELP_TEXT,
    NO_SUMMARY_YET,
    meta,
    prompt_texts,
    roles_and_texts,
    stored,
    system_prompt,
)
from tests.fakes import FakeLLM, FakeTelegram, Reply

CHAT = 1001


async def settle(tg: FakeTelegram, bot: RunningBot, chat_id: int = CHAT) -> None:
    """Wait for background summaries started by turns already answered in this chat.

    A chat's updates are handled one after another, so once a /help sent now is answered,
    every earlier turn has finished, including starting its summary; then wait for those.
    """
    await say(tg, chat_id, "/help")
    await bot.app.core.tasks.join()


async def say(tg: FakeTelegram, chat_id: int, text: str, **kw: object) -> str:
    """Send one message and return the bot's (first) answer to it."""
    before = len(tg.messages_to(chat_id))
    tg.push_text(chat_id, text, **kw)  # type: ignore[arg-type]
    sent = await tg.wait_for_messages(chat_id, before + 1)
    return sent[before].text


async def test_answers_a_message_and_remembers_it(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    assert await say(tg, CHAT, "hello there") == "ANSWER: hello there"
    [request] = llm.chat_requests
    assert request["model"] == "test/model"
    assert prompt_texts(request) == [("user", "hello there")]
    assert NO_HISTORY in system_prompt(request)
    assert roles_and_texts(data_dir, CHAT) == [
        ("user", "hello there"),
        ("assistant", "ANSWER: hello there"),
    ]
    first = stored(data_dir, CHAT)[0]
    assert first["user_id"] == CHAT and first["name"] == "Alice" and first["tg_message_id"]
    assert (CHAT, "typing") in tg.actions
    assert [c["command"] for c in tg.commands] == [
        "start",
        "help",
        "consult",
        "finish",
        "cancel",
        "summary",
        "memory",
        "export",
        "language",
        "model",
        "persona",
        "search",
        "usage",
        "tasks",
        "timezone",
        "tools",
        "import",
        "forget",
        "reset",
    ]

    assert await say(tg, CHAT, "and again") == "ANSWER: and again"
    assert prompt_texts(llm.chat_requests[-1]) == [
        ("user", "hello there"),
        ("assistant", "ANSWER: hello there"),
        ("user", "and again"),
    ]
    assert WITH_HISTORY in system_prompt(llm.chat_requests[-1])


async def test_the_window_starts_where_the_summary_ends(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    bot = await start_bot(window_size=4, summary_every=4)
    for i in range(6):
        await say(tg, CHAT, f"m{i}")
        await settle(tg, bot)
    # 8 messages made a summary due; it covers the oldest 4 (m0, m1), and the window holds
    # everything after it: at least the last 4 messages, fewer than 4 + 4, no overlap.
    [first, _] = llm.summary_requests
    covered = first["messages"][-1]["content"]
    assert "ANSWER: m1" in covered and "m2" not in covered
    assert prompt_texts(llm.chat_requests[-1]) == [
        ("user", "m2"),
        ("assistant", "ANSWER: m2"),
        ("user", "m3"),
        ("assistant", "ANSWER: m3"),
        ("user", "m4"),
        ("assistant", "ANSWER: m4"),
        ("user", "m5"),
    ]
    assert "SUMMARY #1" in system_prompt(llm.chat_requests[-1])


async def test_summary_made_at_40_and_merged_at_60(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    bot = await start_bot()
    assert await say(tg, CHAT, "/summary") == NO_SUMMARY_YET
    for i in range(1, 21):
        await say(tg, CHAT, f"fact {i}")
    # The summary runs after the 20th answer, in background: WINDOW_SIZE + SUMMARY_EVERY
    # messages are not summarized; it covers the oldest 20, the window keeps the last 20.
    await settle(tg, bot)
    assert len(llm.summary_requests) == 1
    first_request = llm.summary_requests[0]["messages"][-1]["content"]
    assert "Previous summary: none" in first_request
    assert "User (Alice): fact 1" in first_request and "Assistant: ANSWER: fact 10" in first_request
    assert "fact 11" not in first_request
    summary_1 = (data_dir / str(CHAT) / "summary.txt").read_text()
    assert summary_1.startswith("SUMMARY #1")
    assert meta(data_dir, CHAT)["summarized_upto"] == 20

    shown = await say(tg, CHAT, "/summary")
    assert summary_1 in shown
    # The next answer's prompt carries the summary, labelled, plus the window after it.
    await say(tg, CHAT, "fact 21")
    assert summary_1 in system_prompt(llm.chat_requests[-1])
    assert "Summary of the earlier conversation" in system_prompt(llm.chat_requests[-1])
    assert prompt_texts(llm.chat_requests[-1])[0] == ("user", "fact 11")

    for i in range(22, 31):
        await say(tg, CHAT, f"fact {i}")
    await settle(tg, bot)
    assert len(llm.summary_requests) == 2
    merge_request = llm.summary_requests[1]["messages"][-1]["content"]
    assert f"Previous summary:\n{summary_1}" in merge_request
    assert "fact 11" in merge_request and "fact 20" in merge_request
    assert "fact 10" not in merge_request  # already covered by the previous summary
    assert "fact 21" not in merge_request  # still in the window
    summary_2 = (data_dir / str(CHAT) / "summary.txt").read_text()
    assert summary_2.startswith("SUMMARY #2")
    log_lines = (data_dir / str(CHAT) / "summaries.log").read_text().splitlines()
    assert len(log_lines) == 2
    m = meta(data_dir, CHAT)
    assert (m["messages_total"], m["summarized_upto"], m["summaries_made"]) == (60, 40, 2)
    instructions = system_prompt(llm.summary_requests[1])
    assert "5 to 8 lines" in instructions and "no lists" in instructions


async def test_failed_summary_is_retried_at_a_later_turn(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    bot = await start_bot(summary_every=2, window_size=1)
    await say(tg, CHAT, "one")
    llm.set_responder(
        lambda body: (
            Reply(status=500, error_message="down")
            if llm.is_summary_request(body)
            else llm.default_reply(body)
        )
    )
    await say(tg, CHAT, "two")  # 4 messages stored, 1 kept in the window: due, and fails
    await settle(tg, bot)
    assert len(llm.summary_requests) == 1
    assert not (data_dir / str(CHAT) / "summary.txt").exists()
    llm.set_responder(None)
    await say(tg, CHAT, "three")
    await settle(tg, bot)
    assert len(llm.summary_requests) == 2
    assert "one" in llm.summary_requests[1]["messages"][-1]["content"]
    assert meta(data_dir, CHAT)["summarized_upto"] == 4  # in steps of 2, the last kept out


async def test_reset_wipes_the_chat(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    await say(tg, CHAT, "my name is Bob")
    assert await say(tg, CHAT, "/reset") == texts.RESET_DONE
    assert not (data_dir / str(CHAT)).exists()
    await say(tg, CHAT, "who am I?")
    assert prompt_texts(llm.chat_requests[-1]) == [("user", "who am I?")]


async def test_memory_survives_a_restart(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    first = await start_bot()
    await say(tg, CHAT, "remember the number 73")
    await first.stop()
    await start_bot()
    await say(tg, CHAT, "what number?")
    assert prompt_texts(llm.chat_requests[-1]) == [
        ("user", "remember the number 73"),
        ("assistant", "ANSWER: remember the number 73"),
        ("user", "what number?"),
    ]


async def test_stopping_finishes_the_answers_in_progress(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    # Telegram already counts an update being answered as delivered: a stop must not drop it.
    bot = await start_bot()
    llm.script(Reply(content="ANSWER: just in time", delay=1.0))  # the model's latency
    tg.push_text(CHAT, "answer me before you go")
    await llm.wait_for_in_flight(1)
    await bot.stop()
    assert [m.text for m in tg.messages_to(CHAT)] == ["ANSWER: just in time"]
    assert [t for _, t in roles_and_texts(data_dir, CHAT)] == [
        "answer me before you go",
        "ANSWER: just in time",
    ]


async def test_chats_never_see_each_other(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    await say(tg, 1, "secret of chat one: swordfish")
    await say(tg, 2, "hello from chat two")
    await say(tg, 2, "what do you know?")
    for request in llm.chat_requests[1:]:
        assert "swordfish" not in str(request["messages"])
    assert all(m.text.startswith("ANSWER: ") for m in tg.messages_to(2))
    assert "swordfish" not in " ".join(m.text for m in tg.messages_to(2))


async def test_a_burst_is_answered_in_order(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    for i in range(5):
        tg.push_text(CHAT, f"burst {i}")
    sent = await tg.wait_for_messages(CHAT, 5)
    assert [m.text for m in sent] == [f"ANSWER: burst {i}" for i in range(5)]
    pairs = roles_and_texts(data_dir, CHAT)
    assert [r for r, _ in pairs] == ["user", "assistant"] * 5
    assert [t for r, t in pairs if r == "user"] == [f"burst {i}" for i in range(5)]
    # Each answer was made with the previous exchanges already in its prompt.
    assert len(prompt_texts(llm.chat_requests[4])) == 9


async def test_different_chats_are_handled_concurrently(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    llm.gate = asyncio.Event()  # hold every answer until three chats are waiting at once
    for chat in (11, 12, 13):
        tg.push_text(chat, f"hi from {chat}")
    await llm.wait_for_in_flight(3)
    llm.gate.set()
    for chat in (11, 12, 13):
        [answer] = await tg.wait_for_messages(chat, 1)
        assert answer.text == f"ANSWER: hi from {chat}"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(status=500, error_message="upstream exploded"), texts.LLM_FAILED),
        (Reply(status=502, error_message="bad gateway"), texts.LLM_FAILED),
        (Reply(status=429, error_message="slow down"), texts.LLM_BUSY),
        (Reply(status=401, error_message="no auth"), texts.LLM_FAILED),
        (Reply(hang=True), texts.LLM_FAILED),
        (Reply(raw_body={"choices": []}), texts.LLM_FAILED),
        (Reply(content="   "), texts.LLM_FAILED),
    ],
    ids=["500", "502", "429", "401", "timeout", "no-choices", "empty"],
)
async def test_llm_failure_gets_a_service_message_and_stores_nothing(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    data_dir: Path,
    caplog: pytest.LogCaptureFixture,
    reply: Reply,
    expected: str,
) -> None:
    # A hung model costs LLM_TIMEOUT; the first call of a process on a loaded machine may
    # take half a second by itself.
    await start_bot(llm_timeout=2.0)
    assert await say(tg, CHAT, "before") == "ANSWER: before"
    llm.script(reply)
    with caplog.at_level(logging.ERROR):
        answer = await say(tg, CHAT, "this one fails")
    assert answer == expected
    assert "upstream exploded" not in answer and "Error" not in answer
    assert any(r.levelno == logging.ERROR for r in caplog.records)
    assert [t for _, t in roles_and_texts(data_dir, CHAT)] == ["before", "ANSWER: before"]
    # The process is alive and the next message works, without the failed one in its prompt.
    assert await say(tg, CHAT, "after") == "ANSWER: after"
    assert "this one fails" not in str(llm.chat_requests[-1]["messages"])


async def test_an_unreachable_llm_gets_a_service_message_and_is_logged_as_such(
    tg: FakeTelegram, start_bot: StartBot, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A port nothing listens on: bind one, note it, close it.
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    await start_bot(openrouter_base_url=f"http://127.0.0.1:{port}/v1")
    with caplog.at_level(logging.ERROR):
        assert await say(tg, CHAT, "anyone there?") == texts.LLM_FAILED
    # The operator reads what went wrong: a refused connection, not a slow model.
    failures = [r.getMessage() for r in caplog.records if r.name == "membot.llm.client"]
    assert failures and all("status=connection error" in f for f in failures), failures
    assert stored(data_dir, CHAT) == []


async def test_enable_retry_recovers_from_a_passing_failure(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(enable_retry=True)
    llm.script(
        Reply(status=503, error_message="busy"),
        Reply(status=429, headers={"Retry-After": "0"}),
    )
    assert await say(tg, CHAT, "persist") == "ANSWER: persist"
    assert len(llm.chat_requests) == 3


@pytest.mark.parametrize("kind", ["sticker"])  # voice, photos: tests/e2e/test_media_*.py
async def test_what_the_bot_does_not_read_gets_a_polite_refusal(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path, kind: str
) -> None:
    await start_bot()
    getattr(tg, f"push_{kind}")(CHAT)
    [answer] = await tg.wait_for_messages(CHAT, 1)
    assert answer.text == texts.TEXT_ONLY
    assert llm.requests == []
    assert stored(data_dir, CHAT) == []


SECTIONS = 80
LONG_MARKDOWN = "\n\n".join(
    f"## Section {i}\n\nThis is **important {i}** and `inline_code<{i}>&more`.\n\n"
    f"```python\nif a_{i} < b and c > d & e:\n    print('<tag>&amp;_x_')\n```"
    for i in range(SECTIONS)
)


async def test_a_10000_character_markdown_answer_arrives_complete_and_in_order(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    assert len(LONG_MARKDOWN) > 10_000
    await start_bot()
    llm.script(LONG_MARKDOWN)
    tg.push_text(CHAT, "write a long answer")
    await tg.wait_for_messages(CHAT, 3)
    await say(tg, CHAT, "ping")  # sequenced after every part of the long answer
    parts = tg.messages_to(CHAT)[:-1]
    assert len(parts) >= 3
    assert tg.errors == []
    assert all(len(p.text.encode("utf-16-le")) // 2 <= 4096 for p in parts)
    whole = "\n".join(p.text for p in parts)
    positions = [whole.index(f"Section {i}") for i in range(SECTIONS)]
    assert positions == sorted(positions)
    for i in range(SECTIONS):
        assert f"if a_{i} < b and c > d & e:" in whole
        assert f"inline_code<{i}>&more" in whole
    assert "**" not in whole and "```" not in whole
    assert any(e["type"] == "pre" for p in parts for e in p.entities)
    # Stored as the model wrote it: Markdown, one message.
    assert roles_and_texts(data_dir, CHAT)[1] == ("assistant", LONG_MARKDOWN)


async def test_rejected_formatting_is_resent_as_plain_text(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    tg.reject_entities_when(lambda params: bool(params.get("entities")))
    llm.script("Some **bold** words")
    assert await say(tg, CHAT, "format please") == "Some bold words"
    assert len(tg.errors) == 1 and "can't parse entities" in tg.errors[0][1]
    assert tg.messages_to(CHAT)[-1].entities == []


async def test_flood_waits_then_rejected_formatting_still_deliver_the_answer(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    # Telegram asks to wait twice (1 s each: the bot honours retry_after), then refuses the
    # formatting: the part must still arrive, as plain text, not vanish.
    tg.fail_next("sendMessage", 429, "Too Many Requests: retry after 1", times=2, chat_id=CHAT)
    tg.reject_entities_when(lambda params: bool(params.get("entities")))
    llm.script("Some **bold** words")
    assert await say(tg, CHAT, "format please") == "Some bold words"
    assert [why.split(":")[0] for _, why in tg.errors] == [
        "Too Many Requests",
        "Too Many Requests",
        "Bad Request",
    ]


async def test_service_messages_get_no_answer(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    await say(tg, CHAT, "hello")
    answer = tg.messages_to(CHAT)[-1]
    tg.push_pinned(CHAT, answer.message_id)  # the user pins the bot's answer
    # The chat's updates are handled in order: once /help is answered, the pin was handled.
    assert await say(tg, CHAT, "/help") == HELP_TEXT
    assert [m.text for m in tg.messages_to(CHAT)] == ["ANSWER: hello", HELP_TEXT]
    assert len(llm.chat_requests) == 1


async def test_memory_listing_longer_than_a_message_arrives_whole(
    tg: FakeTelegram, start_bot: StartBot, data_dir: Path
) -> None:
    facts = [f"Fact {i}: " + "the user likes long, detailed notes. " * 12 for i in range(12)]
    chat_dir = data_dir / str(CHAT)
    chat_dir.mkdir(parents=True)
    (chat_dir / "facts.json").write_text(
        json.dumps({"facts": [{"text": f, "added_at": ""} for f in facts]})
    )
    await start_bot()
    tg.push_text(CHAT, "/memory")
    await tg.wait_for_messages(CHAT, 2)
    await say(tg, CHAT, "/help")  # sequenced after every part of the listing
    parts = [m.text for m in tg.messages_to(CHAT)[:-1]]
    assert len(parts) >= 2 and tg.errors == []
    whole = "\n".join(parts)
    assert [whole.index(f"{i + 1}. {f.strip()}") for i, f in enumerate(facts)] == sorted(
        whole.index(f"{i + 1}. {f.strip()}") for i, f in enumerate(facts)
    )


async def test_the_apology_for_a_failed_update_comes_before_the_next_answer(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    # Telegram refuses the answer itself (not the model failing): the last line of defence
    # apologises, and in order: before the chat's next message is answered.
    tg.fail_next("sendMessage", 400, "Bad Request: message to be replied not found", chat_id=CHAT)
    tg.push_text(CHAT, "this answer will bounce")
    tg.push_text(CHAT, "/help")
    sent = await tg.wait_for_messages(CHAT, 2)
    assert [m.text for m in sent] == [texts.INTERNAL_ERROR, HELP_TEXT]


async def test_logs_at_info_hold_no_message_text_and_no_token(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        bot = await start_bot(summary_every=2, window_size=1)
        await say(tg, CHAT, "my password is hunter2")
        await say(tg, CHAT, "and my pin is 0000")
        await settle(tg, bot)
    assert len(llm.summary_requests) == 1
    assert "llm chat: model=test/model status=ok" in caplog.text
    assert "hunter2" not in caplog.text
    assert TOKEN not in caplog.text and TOKEN.split(":")[1] not in caplog.text
