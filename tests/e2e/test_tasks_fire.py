"""End to end, with real `membot run` processes on the fakes: a task the model sets fires at
its time, as a turn of its own, stored and sent once; after a kill -9 it fires once, late,
and says so; a repeating task fires on schedule until it is cancelled; a naive time is read
in the chat's zone; Hermes mode sets tasks too. Tasks are set a few seconds ahead: the only
waits are for what the test chose.

The fake model plays a user's assistant (`Assistant`): a user message it was told to turn
into a tool call gets that call, a tool result gets "Scheduled.", and a task's turn (its
question starts with "[Scheduled task") gets "DONE: <the task>"."""

from __future__ import annotations

import json
import time
from collections import deque
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from membot.clock import utc_now
from tests.conftest import bot_env
from tests.e2e.helpers import stored
from tests.e2e.processes import Runs
from tests.fakes import FakeLLM, FakeTelegram, Reply
from tests.fakes.openai_server import content_text

CHAT = 2601
TASK_MARK = "[Scheduled task"
# A due task's turn starts within a second of its time; its answer then takes the fake
# model's and Telegram's round trips.
ON_TIME = 1.5


class Assistant:
    """The fake model's part: tool calls planned per user message, "DONE: ..." for tasks."""

    def __init__(self, llm: FakeLLM, *, hermes: bool = False) -> None:
        self.hermes = hermes
        self.planned: deque[tuple[str, dict[str, Any]]] = deque()
        self.task_requests: list[str] = []
        llm.set_responder(self.reply)

    def plan(self, name: str, **arguments: Any) -> None:
        self.planned.append((name, arguments))

    def reply(self, body: dict[str, Any]) -> Reply:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        last = messages[-1] if messages else {}
        text = content_text(last.get("content"))
        if last.get("role") == "tool" or "<tool_response>" in text:
            return Reply(content="Scheduled.")
        if TASK_MARK in text:
            self.task_requests.append(text)
            task = next(line for line in text.splitlines() if line.startswith("Task: "))
            return Reply(content=f"DONE: {task[6:]}")
        if self.planned:
            name, arguments = self.planned.popleft()
            if self.hermes:
                call = json.dumps({"name": name, "arguments": arguments})
                return Reply(content=f"<tool_call>{call}</tool_call>")
            return Reply(
                content=None, tool_calls=[{"function": {"name": name, "arguments": arguments}}]
            )
        return Reply(content=f"ANSWER: {text}")


def ahead(seconds: float, zone: str | None = None) -> tuple[str, datetime]:
    """A `when` `seconds` from now (whole seconds, so it reads back exactly), and its UTC
    time. With `zone`: written on that zone's wall clock without an offset."""
    due = (utc_now() + timedelta(seconds=seconds)).replace(microsecond=0)
    if zone is None:
        return due.isoformat().replace("+00:00", "Z"), due
    return due.astimezone(ZoneInfo(zone)).replace(tzinfo=None).isoformat(), due


def monotonic_of(wall: datetime) -> float:
    """When the monotonic clock (the fake Telegram's `at`) reaches wall-clock time `wall`."""
    return time.monotonic() + (wall - utc_now()).total_seconds()


def done_messages(tg: FakeTelegram) -> list[Any]:
    return [m for m in tg.messages_to(CHAT) if m.text.startswith("DONE: ")]


async def set_task(
    runs: Runs, tg: FakeTelegram, assistant: Assistant, text: str, **arguments: Any
) -> None:
    """The user asks; the model calls a task tool; the user reads "Scheduled."."""
    name = arguments.pop("tool", "schedule_task")
    assistant.plan(name, **arguments)
    before = len(tg.messages_to(CHAT))
    tg.push_text(CHAT, text)
    await runs.until(
        "the tool's confirmation",
        lambda: any(m.text == "Scheduled." for m in tg.messages_to(CHAT)[before:]),
    )


def env(tg: FakeTelegram, llm: FakeLLM, data_dir: Path, **extra: str) -> dict[str, str]:
    return bot_env(tg, llm, data_dir, log_level="INFO", summary_every="1000", **extra)


async def test_a_task_set_by_the_model_fires_at_its_time_and_is_stored(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    assistant = Assistant(llm)
    runs = Runs(tmp_path, env(tg, llm, data_dir))
    bot = await runs.spawn("run")
    try:
        await runs.wait_started("run", 1)
        when, due = ahead(4)
        await set_task(runs, tg, assistant, "remind me to stretch", when=when, task="stretch")
        due_at = monotonic_of(due)
        await runs.until("the task's message", lambda: len(done_messages(tg)) == 1)
        [sent] = done_messages(tg)
        assert sent.text == "DONE: stretch"
        assert 0 <= sent.at - due_at <= ON_TIME
        [asked] = assistant.task_requests
        assert "late by" not in asked
        await runs.stop(bot)
    finally:
        runs.close()
    questions = [m for m in stored(data_dir, CHAT) if m.get("task")]
    assert len(questions) == 1 and "Task: stretch" in questions[0]["content"]
    assert len(done_messages(tg)) == 1


async def test_killed_before_its_time_a_task_fires_once_late_after_the_restart(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    assistant = Assistant(llm)
    runs = Runs(tmp_path, env(tg, llm, data_dir))
    try:
        first = await runs.spawn("run")
        await runs.wait_started("run", 1)
        when, due = ahead(3)
        await set_task(runs, tg, assistant, "remind me to call the bank", when=when, task="bank")
        await runs.kill(first)
        # membot is down at the task's time; it comes back a few seconds after it.
        await runs.until("the task's time to pass", lambda: utc_now() > due + timedelta(seconds=7))
        second = await runs.spawn("run")
        await runs.until("the late task's message", lambda: len(done_messages(tg)) == 1)
        await runs.stop(second)
    finally:
        runs.close()
    assert [m.text for m in done_messages(tg)] == ["DONE: bank"]
    [asked] = assistant.task_requests
    assert "late by" in asked


async def test_a_repeating_task_fires_on_schedule_until_it_is_cancelled(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    assistant = Assistant(llm)
    runs = Runs(tmp_path, env(tg, llm, data_dir, tasks_min_interval="1"))
    bot = await runs.spawn("run")
    try:
        await runs.wait_started("run", 1)
        when, due = ahead(3)
        await set_task(
            runs,
            tg,
            assistant,
            "every 2 s",
            when=when,
            task="tick",
            repeat="FREQ=SECONDLY;INTERVAL=2",
        )
        first_at = monotonic_of(due)
        await runs.until("two runs", lambda: len(done_messages(tg)) >= 2)
        ticks = done_messages(tg)
        assert 0 <= ticks[0].at - first_at <= ON_TIME
        assert 0 <= ticks[1].at - (first_at + 2) <= ON_TIME
        task_id = _scheduled_id(llm)
        await set_task(runs, tg, assistant, "stop ticking", tool="cancel_task", id=task_id)
        cancelled_at = time.monotonic()
        # A one-off marker, set after the cancel: once it has fired, the repeating task
        # would have fired at least once more had it not been cancelled.
        when, _ = ahead(4)
        await set_task(runs, tg, assistant, "then say bye", when=when, task="bye")
        await runs.until("the marker", lambda: done_messages(tg)[-1].text == "DONE: bye")
        await runs.stop(bot)
    finally:
        runs.close()
    late_ticks = [m for m in done_messages(tg) if m.text == "DONE: tick" and m.at > cancelled_at]
    assert late_ticks == []


async def test_a_naive_time_is_read_in_the_chats_zone(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    assistant = Assistant(llm)
    runs = Runs(tmp_path, env(tg, llm, data_dir))
    bot = await runs.spawn("run")
    try:
        await runs.wait_started("run", 1)
        tg.push_text(CHAT, "/timezone Asia/Tokyo")
        await runs.until(
            "the zone confirmed",
            lambda: (
                "Asia/Tokyo" in tg.messages_to(CHAT)[-1].text if tg.messages_to(CHAT) else False
            ),
        )
        when, due = ahead(4, zone="Asia/Tokyo")
        assert "+" not in when and "Z" not in when
        await set_task(runs, tg, assistant, "ping me", when=when, task="tokyo")
        due_at = monotonic_of(due)
        await runs.until("the task's message", lambda: len(done_messages(tg)) == 1)
        assert 0 <= done_messages(tg)[0].at - due_at <= ON_TIME
        await runs.stop(bot)
    finally:
        runs.close()


async def test_hermes_mode_sets_and_fires_tasks(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    assistant = Assistant(llm, hermes=True)
    runs = Runs(tmp_path, env(tg, llm, data_dir, tool_mode="hermes"))
    bot = await runs.spawn("run")
    try:
        await runs.wait_started("run", 1)
        when, due = ahead(3)
        await set_task(runs, tg, assistant, "remind me", when=when, task="hermes")
        due_at = monotonic_of(due)
        await runs.until("the task's message", lambda: len(done_messages(tg)) == 1)
        assert 0 <= done_messages(tg)[0].at - due_at <= ON_TIME
        await runs.stop(bot)
    finally:
        runs.close()


def _scheduled_id(llm: FakeLLM) -> str:
    """The id schedule_task returned, as the model read it in the tool's result."""
    for body in llm.chat_requests:
        for message in body.get("messages") or []:
            text = content_text(message.get("content"))
            if message.get("role") == "tool" or "<tool_response>" in text:
                start = text.find("{")
                try:
                    return str(json.loads(text[start : text.rindex("}") + 1])["id"])
                except (ValueError, KeyError):
                    continue
    raise AssertionError("no schedule_task result seen")


async def test_an_author_over_budget_gets_one_line_instead_of_the_tasks_turn(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    # Every call costs 0.25: setting the task (a tool step and the answer) spends the budget.
    llm.cost_per_call = "0.25"
    assistant = Assistant(llm)
    runs = Runs(tmp_path, env(tg, llm, data_dir, user_daily_budget="0.5"))
    bot = await runs.spawn("run")
    try:
        await runs.wait_started("run", 1)
        when, _ = ahead(3)
        await set_task(runs, tg, assistant, "remind me", when=when, task="budget")
        await runs.until(
            "the line instead of the turn",
            lambda: "not carried out" in tg.messages_to(CHAT)[-1].text,
        )
        await runs.stop(bot)
    finally:
        runs.close()
    assert "daily budget" in tg.messages_to(CHAT)[-1].text
    assert assistant.task_requests == [] and done_messages(tg) == []


def buttons(sent: Any) -> list[dict[str, Any]]:
    """The inline buttons under a message the bot sent, as Telegram got them."""
    markup = sent.params.get("reply_markup")
    markup = json.loads(markup) if isinstance(markup, str) else markup or {}
    return [button for row in markup.get("inline_keyboard", []) for button in row]


async def test_tasks_lists_them_cancel_stops_one_and_reset_removes_the_rest(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    assistant = Assistant(llm)
    runs = Runs(tmp_path, env(tg, llm, data_dir, tasks_min_interval="1"))
    bot = await runs.spawn("run")
    try:
        await runs.wait_started("run", 1)
        when, _ = ahead(4)
        repeat = "FREQ=SECONDLY;INTERVAL=2"
        await set_task(runs, tg, assistant, "tick", when=when, task="tick", repeat=repeat)
        listing = await said(runs, tg, "/tasks")
        assert "tick" in listing.text
        [cancel] = buttons(listing)
        answered = len(tg.callback_answers)
        tg.push_callback(CHAT, listing.message_id, cancel["callback_data"])
        await runs.until("the press answered", lambda: len(tg.callback_answers) > answered)
        pressed_at = time.monotonic()
        assert "Cancelled: tick" in tg.callback_answers[-1].get("text", "")
        # Once a task set after the cancel has fired, the cancelled one would have too.
        when, _ = ahead(4)
        await set_task(runs, tg, assistant, "marker", when=when, task="marker")
        await runs.until(
            "the marker", lambda: "DONE: marker" in [m.text for m in done_messages(tg)]
        )
        assert [m for m in done_messages(tg) if m.at > pressed_at and m.text == "DONE: tick"] == []
        when, _ = ahead(60)
        await set_task(runs, tg, assistant, "later", when=when, task="later")
        await said(runs, tg, "/reset")
        await said(runs, tg, "/tasks")
        assert buttons(tg.messages_to(CHAT)[-1]) == []
        assert "later" not in tg.messages_to(CHAT)[-1].text
        await runs.stop(bot)
    finally:
        runs.close()


async def said(runs: Runs, tg: FakeTelegram, text: str) -> Any:
    """The user writes `text`; the bot's reply to it."""
    before = len(tg.messages_to(CHAT))
    tg.push_text(CHAT, text)
    await runs.until(f"the reply to {text}", lambda: len(tg.messages_to(CHAT)) > before)
    return tg.messages_to(CHAT)[before]
