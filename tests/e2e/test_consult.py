"""End to end: consultations in Telegram, over the real bot, real files and the fake model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from membot.bot import texts
from tests.conftest import StartBot
from tests.e2e.helpers import HELP_TEXT, meta, prompt_texts, roles_and_texts, system_prompt
from tests.fakes import FakeLLM, FakeTelegram, Reply

CHAT = 3003
REQUEST = "help me choose the weights for my exercises"
FINAL_MARK = "This is the final round of the dialog"


async def say(tg: FakeTelegram, text: str, answers: int = 1) -> list[str]:
    """Send one message; the `answers` messages the user then sees, in order."""
    before = len(tg.messages_to(CHAT))
    tg.push_text(CHAT, text)
    sent = await tg.wait_for_messages(CHAT, before + answers)
    return [m.text for m in sent[before:]]


def label(k: int, n: int, *, final: bool = False) -> str:
    # The labels are Markdown (italics); what the user reads is the text without the marks.
    template = texts.ROUND_FINAL if final else texts.ROUND
    return "\n\n" + template.format(round=k, max_rounds=n).strip("_")


def consult_state(data_dir: Path) -> dict[str, Any]:
    return dict(meta(data_dir, CHAT)["state"])


async def test_a_consultation_of_three_rounds_then_back_to_chat(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    llm.script("Which exercises?", "How long have you trained?")
    assert await say(tg, f"/consult 3 {REQUEST}") == ["Which exercises?" + label(1, 3)]
    assert await say(tg, "hammer curls and butterfly") == [
        "How long have you trained?" + label(2, 3)
    ]
    assert consult_state(data_dir)["mode"] == "consultation"
    assert await say(tg, "two months, a beginner") == [
        "ANSWER: two months, a beginner" + label(3, 3, final=True)
    ]
    first, second, third = llm.chat_requests
    # The request itself is the first round's message, without the command.
    assert prompt_texts(first) == [("user", REQUEST)]
    assert "Round 1 of 3" in system_prompt(first) and FINAL_MARK not in system_prompt(first)
    assert "Round 2 of 3" in system_prompt(second) and FINAL_MARK not in system_prompt(second)
    final = system_prompt(third)
    assert f"{FINAL_MARK} (Round 3 of 3)" in final
    assert f'initial request was: "{REQUEST}"' in final
    assert "Ask no new questions" in final
    # The earlier rounds are in the prompt, as the chat's history.
    assert [t for _, t in prompt_texts(third)][:4] == [
        REQUEST,
        "Which exercises?",
        "hammer curls and butterfly",
        "How long have you trained?",
    ]
    state = consult_state(data_dir)
    assert (state["mode"], state["round"], state["complete"]) == ("chat", 3, True)
    # Back in the normal mode: no round text, no label.
    assert await say(tg, "thanks!") == ["ANSWER: thanks!"]
    assert "Round" not in system_prompt(llm.chat_requests[-1])
    # The consultation's messages are the chat's messages.
    assert roles_and_texts(data_dir, CHAT)[:2] == [
        ("user", REQUEST),
        ("assistant", "Which exercises?"),
    ]


async def test_default_rounds_and_refusals_of_bad_commands(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(consult_rounds=2, max_rounds=4)
    assert await say(tg, "/consult") == [texts.CONSULT_USAGE.format(rounds=2)]
    assert await say(tg, "/consult 5 too many rounds") == [
        texts.CONSULT_BAD_ROUNDS.format(max_rounds=4)
    ]
    assert await say(tg, "/consult 0 none at all") == [
        texts.CONSULT_BAD_ROUNDS.format(max_rounds=4)
    ]
    assert await say(tg, "/finish") == [texts.NOT_CONSULTING]
    assert await say(tg, "/cancel") == [texts.NOT_CONSULTING]
    assert llm.chat_requests == []
    assert await say(tg, "/consult plan my week") == ["ANSWER: plan my week" + label(1, 2)]
    assert await say(tg, "/consult another one") == [
        texts.CONSULT_IN_PROGRESS.format(round=2, max_rounds=2)
    ]
    assert await say(tg, "busy days") == ["ANSWER: busy days" + label(2, 2, final=True)]


async def test_finish_asks_for_the_final_answer_in_the_current_round(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    await say(tg, f"/consult 5 {REQUEST}")
    await say(tg, "hammer curls")
    assert await say(tg, "/finish") == [f"ANSWER: {texts.FINISH_REQUEST}" + label(3, 5, final=True)]
    final = system_prompt(llm.chat_requests[-1])
    assert f"{FINAL_MARK} (Round 3 of 5)" in final and REQUEST in final
    assert consult_state(data_dir)["mode"] == "chat"
    assert await say(tg, "/finish") == [texts.NOT_CONSULTING]


async def test_cancel_and_reset_end_a_consultation_and_say_so(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    await say(tg, f"/consult 3 {REQUEST}")
    # Other commands answer as usual and say that the consultation goes on.
    goes_on = "\n\n" + texts.CONSULT_GOES_ON.format(round=2, max_rounds=3)
    assert await say(tg, "/help") == [HELP_TEXT + goes_on]
    assert await say(tg, "/cancel") == [texts.CONSULT_CANCELLED.format(round=2, max_rounds=3)]
    assert await say(tg, "so?") == ["ANSWER: so?"]
    assert "Round" not in system_prompt(llm.chat_requests[-1])

    await say(tg, f"/consult 3 {REQUEST}")
    assert await say(tg, "/reset") == [texts.RESET_DONE + " " + texts.CONSULT_ENDED_BY_RESET]
    assert not (data_dir / str(CHAT)).exists()
    assert await say(tg, "hello again") == ["ANSWER: hello again"]
    assert "Round" not in system_prompt(llm.chat_requests[-1])


async def test_a_restart_between_rounds_carries_on_in_the_same_round(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    bot = await start_bot()
    await say(tg, f"/consult 3 {REQUEST}")
    await say(tg, "hammer curls")
    await bot.stop()
    await start_bot()
    assert await say(tg, "beginner") == ["ANSWER: beginner" + label(3, 3, final=True)]
    assert f"{FINAL_MARK} (Round 3 of 3)" in system_prompt(llm.chat_requests[-1])


async def test_a_failed_round_is_not_counted(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    await say(tg, f"/consult 2 {REQUEST}")
    llm.script(Reply(status=503))
    assert await say(tg, "hammer curls") == [texts.LLM_FAILED]
    assert consult_state(data_dir)["round"] == 1
    assert await say(tg, "hammer curls") == ["ANSWER: hammer curls" + label(2, 2, final=True)]


def start_call(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"function": {"name": "start_consultation", "arguments": arguments}}


def offered(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or [] if "function" in t]


async def test_the_model_starts_a_consultation_with_a_native_tool_call(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    llm.script(
        Reply(
            content="Happy to help; a few questions first.",
            tool_calls=[start_call({"request": "plan a trip to Rome", "rounds": 2})],
        ),
        "When do you travel?",
    )
    assert await say(tg, "plan a trip to Rome for me", answers=2) == [
        "Happy to help; a few questions first.",
        "When do you travel?" + label(1, 2),
    ]
    first, second = llm.chat_requests
    assert "start_consultation" in offered(first)
    assert "Round" not in system_prompt(first)
    # The same turn goes on as round 1: its prompt, and the tool is no longer offered.
    assert "Round 1 of 2" in system_prompt(second)
    assert "start_consultation" not in offered(second)
    assert "search_history" in offered(second)
    state = consult_state(data_dir)
    assert (state["mode"], state["round"], state["max_rounds"]) == ("consultation", 1, 2)
    assert state["initial_request"] == "plan a trip to Rome"
    assert await say(tg, "in May") == ["ANSWER: in May" + label(2, 2, final=True)]
    final = system_prompt(llm.chat_requests[-1])
    assert 'initial request was: "plan a trip to Rome"' in final
    assert "start_consultation" not in offered(llm.chat_requests[-1])


@pytest.mark.parametrize(("rounds", "expected"), [(None, 3), (50, 10), (-2, 1)])
async def test_rounds_of_the_tool_default_and_clamp(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    data_dir: Path,
    rounds: int | None,
    expected: int,
) -> None:
    await start_bot()
    arguments: dict[str, Any] = {"request": "a plan"}
    if rounds is not None:
        arguments["rounds"] = rounds
    llm.script(Reply(content=None, tool_calls=[start_call(arguments)]), "Questions?")
    final = expected == 1
    assert await say(tg, "make me a plan") == ["Questions?" + label(1, expected, final=final)]
    assert consult_state(data_dir)["max_rounds"] == expected


async def test_the_model_starts_a_consultation_in_hermes_mode(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(tool_mode="hermes")
    call = json.dumps({"name": "start_consultation", "arguments": {"request": "a diet"}})
    llm.script(f"Sure, let me ask first. <tool_call>{call}</tool_call>", "Any allergies?")
    assert await say(tg, "I need a diet", answers=2) == [
        "Sure, let me ask first.",
        "Any allergies?" + label(1, 3),
    ]
    first, second = llm.chat_requests
    assert "start_consultation" in system_prompt(first)
    assert "Round 1 of 3" in system_prompt(second)
    assert '"start_consultation"' not in system_prompt(second)
    assert consult_state(data_dir)["mode"] == "consultation"


async def test_a_failed_turn_after_the_tool_leaves_the_chat_in_chat_mode(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    llm.script(
        Reply(content=None, tool_calls=[start_call({"request": "a plan"})]),
        Reply(status=503),
    )
    assert await say(tg, "make me a plan") == [texts.LLM_FAILED]
    assert not (data_dir / str(CHAT) / "meta.json").exists()
    assert await say(tg, "hello") == ["ANSWER: hello"]
    assert consult_state(data_dir)["mode"] == "chat"
