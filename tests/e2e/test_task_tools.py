"""End to end: the model schedules tasks in a real membot against the fakes, native and
Hermes. A bad `when`, a bad RRULE, a rule that repeats too often and one task too many
(TASKS_MAX_PER_CHAT=1) each come back to the model as the error text, and nothing is
scheduled; a good one is in /tasks, with its time as a date_time entity."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from membot.bot import texts
from tests.conftest import StartBot
from tests.fakes import FakeLLM, FakeTelegram, Reply

CHAT = 2626
QUIET = {"summary_every": 1000, "tasks_max_per_chat": 1}
_RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.DOTALL)


def calls(mode: str, *made: tuple[str, dict[str, Any]], then: str) -> tuple[Reply, Reply]:
    """The model makes these calls, then answers `then`."""
    if mode == "native":
        step = Reply(
            tool_calls=[{"function": {"name": name, "arguments": args}} for name, args in made]
        )
    else:
        blocks = (json.dumps({"name": name, "arguments": args}) for name, args in made)
        step = Reply(content="".join(f"<tool_call>\n{b}\n</tool_call>" for b in blocks))
    return step, Reply(content=then)


def results(mode: str, request: dict[str, Any]) -> list[str]:
    """What the tools gave back, in call order, as the model read it."""
    if mode == "native":
        tail = []
        for message in reversed(request["messages"]):
            if message["role"] != "tool":
                break
            tail.append(message["content"])
        return tail[::-1]
    last = request["messages"][-1]
    assert last["role"] == "user"
    return [json.loads(block)["content"] for block in _RESPONSE.findall(last["content"])]


async def ask(tg: FakeTelegram, text: str) -> str:
    before = len(tg.messages_to(CHAT))
    tg.push_text(CHAT, text)
    return (await tg.wait_for_messages(CHAT, before + 1))[before].text


@pytest.mark.parametrize("mode", ["native", "hermes"])
async def test_bad_schedules_are_errors_and_a_good_one_is_listed(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, mode: str
) -> None:
    await start_bot(tool_mode=mode, **QUIET)
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date()
    when = f"{tomorrow}T09:00"
    llm.script(
        *calls(
            mode,
            ("schedule_task", {"when": "tomorrow at nine", "task": "call the bank"}),
            ("schedule_task", {"when": when, "task": "call the bank", "repeat": "FREQ=OFTEN"}),
            ("schedule_task", {"when": when, "task": "call the bank", "repeat": "FREQ=MINUTELY"}),
            then="I could not schedule that.",
        )
    )
    assert await ask(tg, "remind me tomorrow at nine to call the bank") == (
        "I could not schedule that."
    )
    bad_when, bad_rule, too_often = results(mode, llm.chat_requests[-1])
    assert bad_when.startswith("Error: 'tomorrow at nine' is not an ISO 8601 date-time")
    assert bad_rule.startswith("Error: the repeat rule 'FREQ=OFTEN' does not parse")
    assert too_often == (
        "Error: the repeat rule 'FREQ=MINUTELY' runs every 1 minute at times; tasks may "
        "repeat at most once every 15 minutes"
    )
    assert await ask(tg, "/tasks") == texts.EN.NO_TASKS

    llm.script(
        *calls(mode, ("schedule_task", {"when": when, "task": "call the bank"}), then="Done.")
    )
    assert await ask(tg, "remind me tomorrow at nine to call the bank") == "Done."
    [scheduled] = results(mode, llm.chat_requests[-1])
    due = datetime.fromisoformat(f"{when}+00:00")
    assert json.loads(scheduled) | {"id": "-"} == {
        "id": "-",
        "next_local": due.isoformat(),
        "next_utc": f"{when}:00.000Z",
    }
    listing = await ask(tg, "/tasks")
    assert listing.startswith("Tasks in this chat (1):\n\n1. call the bank\n")
    [entity] = [e for e in tg.messages_to(CHAT)[-1].entities if e["type"] == "date_time"]
    assert entity["unix_time"] == int(due.timestamp())

    llm.script(*calls(mode, ("schedule_task", {"when": when, "task": "and another"}), then="Full."))
    assert await ask(tg, "and remind me of another thing") == "Full."
    [too_many] = results(mode, llm.chat_requests[-1])
    assert too_many == (
        "Error: this chat has 1 scheduled tasks, the most it may have: cancel one first "
        "(list_tasks shows them)"
    )
    assert (await ask(tg, "/tasks")).startswith("Tasks in this chat (1):\n\n1. call the bank\n")
    # The model is told it can schedule, and the chat's time with the message.
    request = llm.chat_requests[-2]  # the turn's first: its last message is the user's
    assert "Never promise to do something later" in request["messages"][0]["content"]
    assert request["messages"][-1]["content"].startswith("[Now: ")
    assert request["messages"][-1]["content"].endswith("and remind me of another thing")
