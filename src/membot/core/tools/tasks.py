"""Reminders and scheduled tasks, as the model sets them: `schedule_task`, `list_tasks`,
`cancel_task` and `set_timezone`. Offered in Telegram chats with TASKS on only (the agent's
offers, core/offers.py); each reaches its chat's tasks through the turn's TaskBook
(core/tools/book.py). At its time a task comes back as a turn of its own (membot.schedule).

A refusal (a time in the past, a rule that does not parse or repeats too often, a chat that
has TASKS_MAX_PER_CHAT tasks) is a ToolError saying which, and nothing is scheduled."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime, timedelta
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from pydantic import Field

from membot.clock import iso
from membot.core.tools.book import TaskBook
from membot.core.tools.context import TurnContext
from membot.llm.tools.registry import ToolError, ToolRegistry
from membot.schedule.models import MAX_TEXT, InvalidTaskId, Task, check_task_id, new_task_id
from membot.schedule.rules import BadSchedule, check_repeat, next_time, parse_when, zone_named
from membot.schedule.show import local_iso, now_line

log = logging.getLogger(__name__)

# In the system prompt wherever the task tools are offered: the same words every turn.
TASKS_NOTE = (
    "You can set reminders and scheduled tasks in this chat: schedule_task runs a task at a "
    "time (once, or repeating), list_tasks and cancel_task show and cancel them, and "
    "set_timezone sets the chat's time zone once the user tells you where they are. At its "
    "time a task comes back to you as a message, and you carry it out. Never promise to do "
    "something later (remind, check back, send or look up something at a time) without "
    "scheduling it with schedule_task; if it cannot be scheduled, say so. Each new user "
    "message starts with the current date, weekday, time and time zone of the chat in "
    "square brackets."
)

task_tools = ToolRegistry()


def _book(ctx: TurnContext) -> TaskBook:
    if ctx.tasks is None:
        raise ToolError("tasks cannot be scheduled in this conversation")
    return ctx.tasks


@task_tools.tool
async def schedule_task(
    ctx: TurnContext,
    when: Annotated[str, Field(min_length=1, max_length=64)],
    task: Annotated[str, Field(min_length=1, max_length=MAX_TEXT)],
    repeat: Annotated[str | None, Field(max_length=500)] = None,
) -> str:
    """Schedule a reminder or a task in this chat: at its time it comes back to you as a
    message and you carry it out (remind the user, look something up and report, ask how
    something went). Use it whenever the user wants something done later or regularly.
    Returns the task's id and its next time, in the chat's time zone and in UTC.

    Args:
        when: An ISO 8601 date-time. Without an offset it is in the chat's time zone
            (2026-03-14T09:00); with one, or Z, it is absolute (2026-03-14T08:00Z). For a
            repeating task, the rule's first times are counted from it.
        task: What to do at that time, in the user's words, e.g. "remind me to call the bank"
            or "tell me the weather in Lisbon".
        repeat: Only for a repeating task: an iCalendar RRULE such as FREQ=DAILY,
            FREQ=WEEKLY;BYDAY=MO,TH or FREQ=HOURLY;INTERVAL=2 (daily and longer rules keep
            the wall-clock time of the chat's zone). Leave it out for a one-time task.
    """
    book = _book(ctx)
    # At its time a task's words come back as the user's: a server's must not set one.
    ctx.from_the_user("nothing scheduled")
    text = task.strip()
    if not text:
        raise ToolError("the task is empty: say what to do at that time")
    now = book.clock()
    zone = book.zone
    try:
        # A sparse rule may take a second of CPU to check: not in the event loop.
        due, local, rule = await asyncio.to_thread(
            _times, when, repeat, zone, now, book.options.min_interval
        )
    except BadSchedule as exc:
        raise ToolError(str(exc)) from None
    found = Task(
        id=new_task_id(),
        chat=book.chat,
        text=text,
        due=due,
        zone=zone.key,
        created=now,
        author=book.author,
        name=book.name,
        repeat=rule,
        anchor=local.isoformat(timespec="seconds"),
        thread=book.thread,
    )
    limit = book.options.max_per_chat
    if not await book.store.add(found, limit):
        raise ToolError(
            f"this chat has {limit} scheduled tasks, the most it may have: cancel one first "
            "(list_tasks shows them)"
        )
    log.info("chat %s: task %s scheduled, due %s", book.chat, found.id, iso(due))
    return json.dumps(
        {"id": found.id, "next_local": local_iso(due, zone), "next_utc": iso(due)},
        ensure_ascii=False,
    )


@task_tools.tool
async def list_tasks(ctx: TurnContext) -> str:
    """The tasks scheduled in this chat, soonest first: each with its id (for cancel_task),
    what to do, its next time in the chat's time zone and in UTC, its repeat rule (none:
    once) and who set it."""
    book = _book(ctx)
    found = await book.store.tasks(book.chat)
    listed: list[dict[str, Any]] = [
        {
            "id": t.id,
            "task": t.text,
            "next_local": local_iso(t.due, book.zone),
            "next_utc": iso(t.due),
            "repeat": t.repeat,
            "set_by": t.name,
        }
        for t in found
    ]
    return json.dumps(
        {"time_zone": book.zone.key, "now": now_line(book.clock(), book.zone), "tasks": listed},
        ensure_ascii=False,
    )


@task_tools.tool
async def cancel_task(
    ctx: TurnContext, id: Annotated[str, Field(min_length=1, max_length=32)]
) -> str:
    """Cancel a scheduled task: it will not run again. In a group only the task's author or
    an administrator may cancel it.

    Args:
        id: The task's id, as schedule_task or list_tasks gave it.
    """
    book = _book(ctx)
    try:
        task_id = check_task_id(id)
    except InvalidTaskId:
        raise ToolError(f"{id!r} is not a task id (list_tasks shows them)") from None
    found = await book.store.get(book.chat, task_id)
    if found is None:
        raise ToolError(f"there is no task {task_id} in this chat (list_tasks shows them)")
    if not book.may_cancel(found):
        who = found.name or "who set it"
        raise ToolError(f"only the task's author ({who}) or an administrator may cancel it")
    if await book.store.remove(book.chat, task_id) is None:
        raise ToolError(f"there is no task {task_id} in this chat any more")
    log.info("chat %s: task %s cancelled by the model", book.chat, task_id)
    return f"Cancelled task {task_id}: {found.text}"


@task_tools.tool
async def set_timezone(
    ctx: TurnContext, zone: Annotated[str, Field(min_length=1, max_length=64)]
) -> str:
    """Set this chat's time zone, once the user has told you where they are (or which zone
    they want): times without an offset are read in it, and every time is shown in it. Tasks
    already scheduled keep their times.

    Args:
        zone: An IANA time zone name such as "Europe/Berlin", "America/New_York" or "UTC".
    """
    book = _book(ctx)
    try:
        named = zone_named(zone)
    except BadSchedule as exc:
        raise ToolError(str(exc)) from None
    if book.group and not book.admin:
        raise ToolError(
            "in a group only its administrators set the chat's time zone, with /timezone"
        )
    kept = book.set_zone(named)
    said = f"The chat's time zone is now {named.key}: it is {now_line(book.clock(), named)}."
    return said if kept else said + " (for this message only: it cannot be saved right now)"


def _times(
    when: str, repeat: str | None, zone: ZoneInfo, now: datetime, min_interval: float
) -> tuple[datetime, datetime, str | None]:
    """(its first time, UTC; `when` on the zone's wall clock; the rule as kept), or
    BadSchedule."""
    due, local = parse_when(when, zone, now)
    if repeat is None or not repeat.strip():
        return due, local, None
    rule = check_repeat(repeat, local, zone, min_interval)
    # The rule's own first time at or after `when` (a weekly rule on Mondays from a Tuesday
    # starts next Monday), as its later times are worked out.
    first = next_time(rule, local, zone, due - timedelta(milliseconds=1))
    if first is None:
        raise BadSchedule(f"the repeat rule {repeat!r} has no time after {when!r}")
    return first, local, rule
