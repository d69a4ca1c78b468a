"""End to end: the tool loop in both modes, against the real bot and the scripted fake model."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from membot.bot import texts
from membot.core.steps import GAVE_UP
from membot.ids import ConversationId
from membot.llm.tools import hermes
from membot.llm.wire import WEB_SEARCH_TOOL
from membot.memory.contract.models import Message
from membot.memory.files import FileRepository
from membot.tool_names import BUILTIN_TOOL_NAMES
from tests.conftest import StartBot
from tests.e2e.helpers import stored, system_prompt
from tests.fakes import FakeLLM, FakeTelegram, Reply

CHAT = 2002
# Tool turns store several messages each: keep the summarizer out of the scripts.
QUIET = {"summary_every": 1000}


def native_call(name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"function": {"name": name, "arguments": arguments}}
    if call_id:
        call["id"] = call_id
    return call


def tool_step(say: str | None, *calls: dict[str, Any], then: str) -> tuple[Reply, Reply]:
    """A scripted tool step: the model says `say` and makes `calls`, then answers `then`."""
    return Reply(content=say, tool_calls=list(calls)), Reply(content=then)


def hermes_call(name: str, arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


async def ask(tg: FakeTelegram, text: str, answers: int, chat_id: int = CHAT) -> list[str]:
    """Send one message; return the `answers` messages the user then sees, in order."""
    before = len(tg.messages_to(chat_id))
    tg.push_text(chat_id, text)
    sent = await tg.wait_for_messages(chat_id, before + answers)
    return [m.text for m in sent[before:]]


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def functions(request: dict[str, Any]) -> list[str]:
    """The function tools a request declares (the web search, a server tool, aside)."""
    return [t["function"]["name"] for t in request.get("tools") or [] if "function" in t]


def all_sent_text(tg: FakeTelegram, chat_id: int = CHAT) -> str:
    return "\n".join(m.text for m in tg.messages_to(chat_id))


# ---- native mode ----------------------------------------------------------------------


async def test_no_tool_needed_means_one_request_per_message(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    assert await ask(tg, "hi", 1) == ["ANSWER: hi"]
    assert await ask(tg, "and again", 1) == ["ANSWER: and again"]
    assert len(llm.requests) == 2
    assert functions(llm.requests[0]) == list(BUILTIN_TOOL_NAMES)
    assert llm.requests[0]["tools"][-1] == WEB_SEARCH_TOOL  # WEB_SEARCH, on by default
    assert "tool_choice" not in llm.requests[0]


async def test_native_remember_round_trip_and_memory_commands(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(**QUIET)
    llm.script(
        *tool_step(
            "Let me note that.",
            native_call("remember", {"fact": "Anna drinks green tea"}),
            then="Noted, Anna!",
        )
    )
    # The text beside the call reaches the user first, then the answer.
    assert await ask(tg, "remember: I drink green tea", 2) == ["Let me note that.", "Noted, Anna!"]
    second = llm.chat_requests[1]
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "remember"
    assert tool_messages(second)[0]["content"] == "Remembered: Anna drinks green tea"

    # History keeps the whole turn, tool call and result included.
    turn = stored(data_dir, CHAT)
    assert [m["role"] for m in turn] == ["user", "assistant", "tool", "assistant"]
    assert turn[1]["content"] == "Let me note that."
    assert turn[1]["tool_calls"][0]["id"] == turn[2]["tool_call_id"]
    assert turn[3]["content"] == "Noted, Anna!"

    # Facts are in every later prompt, and the model sees what it did last time.
    await ask(tg, "what do I drink?", 1)
    last = llm.chat_requests[-1]
    assert "- Anna drinks green tea" in system_prompt(last)
    assert [m["role"] for m in last["messages"][1:]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]

    listing = await ask(tg, "/memory", 1)
    assert "1. Anna drinks green tea" in listing[0]
    assert await ask(tg, "/reset", 1) == [texts.RESET_DONE]
    assert await ask(tg, "/memory", 1) == [texts.NO_FACTS]
    await ask(tg, "hello again", 1)
    assert "green tea" not in json.dumps(llm.chat_requests[-1])


async def test_concurrent_calls_come_back_in_call_order(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(**QUIET)
    llm.script(
        *tool_step(
            "",
            native_call("calculate", {"expression": "6*7"}, "c-1"),
            native_call("current_datetime", {"timezone": "Nowhere/Land"}, "c-2"),
            native_call("calculate", {"expression": "2**10"}, "c-3"),
            then="42 and 1024.",
        )
    )
    assert await ask(tg, "compute", 1) == ["42 and 1024."]  # no empty interim message
    results = tool_messages(llm.chat_requests[1])
    assert [(m["tool_call_id"], m["content"][:20]) for m in results] == [
        ("c-1", "42"),
        ("c-2", "Error: unknown time "),
        ("c-3", "1024"),
    ]
    assert [m["role"] for m in stored(data_dir, CHAT)] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
    ]


async def test_every_failure_goes_back_to_the_model_as_a_tool_result(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(**QUIET)
    llm.script(
        *tool_step(
            None,
            native_call("weather", {"city": "Oslo"}),
            native_call("calculate", '{"expression": "1+'),
            native_call("search_history", {"query": "x", "limit": "lots"}),
            native_call("calculate", {"expression": "1/0"}),
            then="Sorry, some tools failed.",
        )
    )
    assert await ask(tg, "try things", 1) == ["Sorry, some tools failed."]
    unknown, not_json, bad_schema, raised = (
        m["content"] for m in tool_messages(llm.chat_requests[1])
    )
    assert unknown.startswith("Unknown tool: weather. Available tools: search_history, remember")
    assert "not valid JSON" in not_json and '"expression"' in not_json
    # Kept as valid JSON, so a provider that parses past calls does not refuse the history.
    [call_message] = [m for m in llm.chat_requests[1]["messages"] if m.get("tool_calls")]
    garbled = call_message["tool_calls"][1]["function"]["arguments"]
    assert json.loads(garbled) == {"unparsed": '{"expression": "1+'}
    assert "invalid arguments for search_history: limit" in bad_schema
    assert raised == "Error: division by zero"


async def test_the_cap_ends_with_one_call_without_tools(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(tool_max_iterations=3, **QUIET)

    def stubborn(body: dict[str, Any]) -> Reply:
        if body.get("tool_choice") == "none":
            return Reply(content="Here is what I found.")
        return Reply(content=None, tool_calls=[native_call("calculate", {"expression": "1+1"})])

    llm.set_responder(stubborn)
    assert await ask(tg, "loop forever", 1) == ["Here is what I found."]
    assert len(llm.chat_requests) == 4  # 3 tool steps + the final answer
    assert [r.get("tool_choice") for r in llm.chat_requests] == [None, None, None, "none"]
    roles = [m["role"] for m in stored(data_dir, CHAT)]
    assert roles == ["user"] + ["assistant", "tool"] * 3 + ["assistant"]


async def test_a_model_that_says_nothing_at_the_cap_still_gets_an_answer_out(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(tool_max_iterations=2, **QUIET)
    llm.set_responder(
        lambda body: Reply(content="", tool_calls=[native_call("calculate", {"expression": "1"})])
    )
    assert await ask(tg, "loop", 1) == [GAVE_UP]
    assert len(llm.chat_requests) == 3


async def test_window_never_splits_a_tool_exchange(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    # Window 3 would cut right after the assistant's call, leaving two orphan tool results.
    await start_bot(window_size=3, **QUIET)
    llm.script(
        *tool_step(
            "Checking.",
            native_call("calculate", {"expression": "1+1"}),
            native_call("calculate", {"expression": "2+2"}),
            then="2 and 4.",
        )
    )
    await ask(tg, "sums", 2)
    assert await ask(tg, "thanks", 1) == ["ANSWER: thanks"]  # the fake rejects orphans with 400
    assert llm.errors == []
    window = llm.chat_requests[-1]["messages"][1:]
    assert window[0]["role"] != "tool"


async def test_search_history_finds_what_the_window_lost(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    repo = FileRepository(data_dir)
    old = [Message(role="user", content="My locker code is 4711, keep it in mind")]
    old += [Message(role="user", content=f"filler message number {i}") for i in range(300)]
    await repo.append(ConversationId.telegram(CHAT), old)
    await repo.close()
    # No summary made yet: the window starts where the one now due will end (core/window.py),
    # the last 4 to 23 messages; the locker code is far before.
    await start_bot(window_size=4, summary_every=20)
    llm.script(
        *tool_step(
            "Searching.",
            native_call("search_history", {"query": "locker code"}),
            then="It is 4711.",
        )
    )
    assert await ask(tg, "what was my locker code?", 2) == ["Searching.", "It is 4711."]
    [result] = tool_messages(llm.chat_requests[1])
    assert "My locker code is 4711" in result["content"]
    assert "4711" not in json.dumps(llm.chat_requests[0]["messages"])  # not in the window


async def test_tools_switched_off_sends_no_tools(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    first = await start_bot(tools="")
    await ask(tg, "hi", 1)
    assert llm.requests[0]["tools"] == [WEB_SEARCH_TOOL]  # only the provider's web search
    await first.stop()
    await start_bot(tools="", web_search=False)
    await ask(tg, "hi again", 1)
    assert "tools" not in llm.requests[1]


# ---- hermes mode ----------------------------------------------------------------------


async def test_hermes_round_trip(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(tool_mode="hermes", **QUIET)
    llm.script(
        f"Sure, one sec.\n{hermes_call('calculate', {'expression': '6*7'})}",
        "It is **42**.",
    )
    assert await ask(tg, "what is 6 times 7?", 2) == ["Sure, one sec.", "It is 42."]
    first, second = llm.chat_requests
    assert first["tools"] == [WEB_SEARCH_TOOL]  # no function tools: they are in the prompt
    assert '"name": "calculate"' in system_prompt(first) and "<tool_call>" in system_prompt(first)
    # The model sees its own call and the result in the Hermes format.
    assert second["messages"][-2]["role"] == "assistant"
    assert "<tool_call>" in second["messages"][-2]["content"]
    response = second["messages"][-1]
    assert response["role"] == "user"
    assert response["content"].startswith("<tool_response>")
    assert json.loads(response["content"].split("\n")[1]) == {"name": "calculate", "content": "42"}
    # Stored canonically, so a switch of TOOL_MODE keeps the history usable.
    turn = stored(data_dir, CHAT)
    assert [m["role"] for m in turn] == ["user", "assistant", "tool", "assistant"]
    assert turn[1]["tool_calls"][0]["function"]["name"] == "calculate"
    assert "tool_call" not in turn[1]["content"]


async def test_hermes_broken_json_goes_back_as_an_error(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(tool_mode="hermes", **QUIET)
    llm.script(
        "Let me compute. "
        '<tool_call>{"name": "calculate", "arguments": {"expression": 6*7}}</tool_call>',
        hermes_call("calculate", {"expression": "6*7"}),
        "The answer is 42.",
    )
    assert await ask(tg, "6*7?", 2) == ["Let me compute.", "The answer is 42."]
    error = llm.chat_requests[1]["messages"][-1]["content"]
    assert "not valid JSON" in error and "<tool_call>" in error
    assert '"content": "42"' in llm.chat_requests[2]["messages"][-1]["content"]


async def test_hermes_cap_asks_for_a_plain_answer(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(tool_mode="hermes", tool_max_iterations=2, **QUIET)

    def stubborn(body: dict[str, Any]) -> str:
        if hermes.FINAL_NOTE in body["messages"][-1]["content"]:
            return f"Done: 2. {hermes_call('calculate', {'expression': '1+1'})}"
        return hermes_call("calculate", {"expression": "1+1"})

    llm.set_responder(stubborn)
    assert await ask(tg, "loop", 1) == ["Done: 2."]
    assert len(llm.chat_requests) == 3


@pytest.mark.parametrize("mode", ["native", "hermes"])
async def test_tags_never_reach_telegram(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, mode: str
) -> None:
    await start_bot(tool_mode=mode, **QUIET)
    llm.script(
        f"Checking the time. {hermes_call('current_datetime', {'timezone': 'UTC'})} <tool_call>",
        'It is late. <tool_response>{"name": "x", "content": "invented"}</tool_response>',
    )
    shown = await ask(tg, "what time is it?", 2)
    assert shown == ["Checking the time.", "It is late."]
    assert "tool_" not in all_sent_text(tg).lower()
    assert len(llm.chat_requests) == 2


async def test_hermes_one_request_when_no_tool(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(tool_mode="hermes")
    assert await ask(tg, "just chat", 1) == ["ANSWER: just chat"]
    assert len(llm.requests) == 1


async def test_switching_tools_off_keeps_earlier_tool_use_readable(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    first = await start_bot(**QUIET)
    llm.script(*tool_step("", native_call("calculate", {"expression": "6*7"}), then="It is 42."))
    await ask(tg, "6*7?", 1)
    await first.stop()
    await start_bot(tools="", **QUIET)
    assert await ask(tg, "thanks", 1) == ["ANSWER: thanks"]
    request = llm.chat_requests[-1]
    # No tools declared, so no native tool messages either: the earlier call reads as text.
    assert functions(request) == []
    assert all("tool_calls" not in m and m["role"] != "tool" for m in request["messages"])
    assert any('"content": "42"' in m["content"] for m in request["messages"])


async def test_a_lost_progress_note_does_not_cost_the_answer(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(**QUIET)
    llm.script(
        *tool_step(
            "Let me check.",
            native_call("calculate", {"expression": "6*7"}),
            then="It is 42.",
        )
    )
    tg.fail_next("sendMessage", 500, "Internal Server Error", chat_id=CHAT)
    assert await ask(tg, "6*7?", 1) == ["It is 42."]
    assert [m["role"] for m in stored(data_dir, CHAT)] == ["user", "assistant", "tool", "assistant"]


async def test_tool_turns_log_no_message_text_at_info(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, caplog: pytest.LogCaptureFixture
) -> None:
    await start_bot(**QUIET)
    llm.script(
        *tool_step(
            "Noting the pin.",
            native_call("remember", {"fact": "bank pin is 8642"}),
            native_call("calculate", {"expression": "8642 + 1"}),
            then="Kept: 8642.",
        )
    )
    with caplog.at_level(logging.INFO):
        await ask(tg, "my bank pin is 8642, remember it", 2)
    assert "tool remember: conversation=tg:2002 status=ok" in caplog.text
    assert "8642" not in caplog.text
