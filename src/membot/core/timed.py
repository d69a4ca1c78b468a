"""A due task's turn, whatever door sends its answer: what to do with a firing, the message
the model is given, and the task moved on.

A firing (schedule/models.py) reaches the chat as an update (intake/due.py), and its door
(bot/due.py) calls `begin` inside the chat's turn, which the runner holds. Exactly once comes
from three checks made there, in the chat's turn, against what is stored:
- the task must still be due at the firing's time (a cancelled task, or one whose turn ran
  and moved it, is not run);
- the archive must hold no turn of this firing (a turn stored before the process died
  before moving its task: the task is moved now, and the stored answer is sent by the
  outbox, as any answer stored and not sent);
- the author must still be allowed (ALLOWED_USER_IDS), and the task not later than
  TASKS_GRACE (then it is dropped with a note).
The turn's answer is stored with its question marked by the firing (`Message.task`), then
`finish` moves the task to its next time after now (a task missed for a week runs once)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from membot.clock import Clock, utc_now
from membot.config.groups import TaskSettings
from membot.core.turn import Incoming
from membot.ids import ConversationId
from membot.memory.contract.repository import ChatRepository
from membot.schedule.models import Firing, Task
from membot.schedule.rules import BadSchedule, next_time, zone_named
from membot.schedule.show import chat_zone, local_time
from membot.schedule.store import TaskStore

log = logging.getLogger(__name__)

# How far back the archive is read for a turn of the firing (it ran minutes ago at most).
RAN_WINDOW = 200


@dataclass(frozen=True, slots=True)
class Due:
    """A firing to carry out now: its task, how late it is, the task's next time (None:
    the last), and the turn's message. `dropped`: too late; only a note is sent."""

    task: Task
    firing: Firing
    now: datetime
    late: timedelta
    following: datetime | None
    incoming: Incoming
    dropped: bool = False


class TaskTurns:
    def __init__(
        self,
        store: TaskStore,
        repository: ChatRepository,
        settings: TaskSettings,
        *,
        allowed: frozenset[int] = frozenset(),
        clock: Clock = utc_now,
    ) -> None:
        self.store = store
        self.repository = repository
        self.settings = settings
        self.allowed = allowed
        self.clock = clock

    async def begin(self, firing: Firing) -> Due | None:
        """Inside the chat's turn: the firing to carry out, or None when there is nothing to
        do (the task moved on, was cancelled, ran already, or its author was taken off the
        allowlist: then it is moved on here)."""
        task = await self.store.get(firing.chat, firing.task)
        if task is None or task.due != firing.due:
            log.debug("task %s: cancelled or run already; nothing to do", firing.task)
            return None
        now = self.clock()
        # A sparse rule may take a moment of CPU to walk: not in the event loop.
        following = await asyncio.to_thread(self.following, task, now)
        if await self.ran(firing):
            log.info("task %s: its turn was stored before a restart; moved on", firing.task)
            await self.store.advance(task.chat, task.id, task.due, following)
            return None
        if self.allowed and task.author not in self.allowed:
            log.info("task %s skipped: its author is not allowed any more", task.id)
            await self.store.advance(task.chat, task.id, task.due, following)
            return None
        late = max(now - task.due, timedelta(0))
        incoming = self._incoming(task, firing, now, late, following)
        due = Due(task, firing, now, late, following, incoming)
        if late.total_seconds() > self.settings.grace:
            log.warning("task %s dropped: %d s late (TASKS_GRACE)", task.id, late.total_seconds())
            await self.finish(due)
            return Due(task, firing, now, late, following, due.incoming, dropped=True)
        return due

    async def finish(self, due: Due) -> None:
        """The task moved to its next time, or removed after its last."""
        task = due.task
        await self.store.advance(task.chat, task.id, task.due, due.following)

    def following(self, task: Task, now: datetime) -> datetime | None:
        """The task's next time after now (and after its due time), None after its last."""
        if task.repeat is None or task.anchor is None:
            return None
        try:
            zone = zone_named(task.zone)
            anchor = datetime.fromisoformat(task.anchor)
            return next_time(task.repeat, anchor, zone, max(now, task.due))
        except (BadSchedule, ValueError):  # a rule that reads no more: its last time was now
            log.warning("task %s: its repeat rule no longer reads; it ends here", task.id)
            return None

    async def ran(self, firing: Firing) -> bool:
        stored = await self.repository.tail(ConversationId.telegram(firing.chat), RAN_WINDOW)
        return any(m.task == firing.key for m in stored if m.role == "user")

    def _incoming(
        self,
        task: Task,
        firing: Firing,
        now: datetime,
        late: timedelta,
        following: datetime | None,
    ) -> Incoming:
        return Incoming(
            conversation=ConversationId.telegram(task.chat),
            text=task_message(task, now, late, following),
            user_id=task.author,
            name=task.name,
            group=task.chat < 0,
            thread=task.thread,
            task=firing.key,
        )


def task_message(task: Task, now: datetime, late: timedelta, following: datetime | None) -> str:
    """What the model is given for a due task: the task in the user's words, when it was set
    and due, that it is now, and what to do with it. Stored as the turn's question."""
    zone = chat_zone(task.zone, "UTC")
    when = local_time(task.due, zone)
    lines = [
        f"[Scheduled task, set {local_time(task.created, zone)}, due {when}; "
        f"it is now {local_time(now, zone)}"
        + (f", late by {_span(late)} (membot was not running)" if late >= _LATE else "")
        + "]",
        f"Task: {task.text}",
        "Carry it out now: write the message the user should get at this time (a reminder: "
        "remind them; a question: ask it; something to find out: find it out and tell them). "
        "Do not schedule it again"
        + (
            f": it repeats by itself ({task.repeat}), next on {local_time(following, zone)}."
            if following is not None
            else "."
        ),
    ]
    return "\n".join(lines)


# Later than this, the model is told the task runs late (on time, its turn starts within a
# second of its time).
_LATE = timedelta(seconds=5)


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} days {hours % 24} h"
