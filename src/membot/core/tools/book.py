"""A turn's handle on its chat's tasks (`TaskBook`, in the TurnContext the task tools get),
and what the agent opens one from (`TaskDesk`): only for a Telegram chat, with TASKS on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from membot.clock import Clock, utc_now
from membot.config import TaskSettings
from membot.ids import TELEGRAM, ConversationId
from membot.schedule.models import Task
from membot.schedule.show import chat_zone, now_line
from membot.schedule.store import TaskStore

if TYPE_CHECKING:
    from membot.core.plan import TurnPlan
    from membot.core.turn import Incoming


def _not_kept(zone: str) -> bool:
    return False


@dataclass(slots=True)
class TaskBook:
    """The chat's tasks as one turn sees them: where they are kept, whose turn it is (a task
    set now is theirs: its turns are charged to them), the forum topic it is in, the chat's
    time zone as the turn stands, the limits, the clock. `set_zone` changes the zone for the
    rest of the turn and hands it to `on_zone` (the turn's plan: stored with the turn;
    False when the turn stores no state)."""

    store: TaskStore
    chat: int
    zone: ZoneInfo
    options: TaskSettings
    author: int | None = None
    name: str | None = None
    thread: int | None = None
    group: bool = False
    admins: frozenset[int] = frozenset()  # ADMIN_USER_IDS
    clock: Clock = utc_now
    on_zone: Callable[[str], bool] = field(default=_not_kept)

    @property
    def admin(self) -> bool:
        return self.author is not None and self.author in self.admins

    def may_cancel(self, task: Task) -> bool:
        """In a group only a task's author or an admin may cancel it; in a private chat, the
        user may cancel any (they are all theirs)."""
        return (
            not self.group or self.admin or (self.author is not None and task.author == self.author)
        )

    def set_zone(self, zone: ZoneInfo) -> bool:
        """The chat's zone from now on; whether it is stored with the turn."""
        self.zone = zone
        return self.on_zone(zone.key)

    def now(self) -> str:
        """What the model is told with the new message: the chat's date, time and zone."""
        return now_line(self.clock(), self.zone)


@dataclass(frozen=True, slots=True)
class TaskDesk:
    """Built once with the agent: the task store, TASKS and its limits, ADMIN_USER_IDS."""

    store: TaskStore
    options: TaskSettings
    admins: frozenset[int] = frozenset()
    clock: Clock = utc_now

    def for_turn(self, incoming: Incoming, plan: TurnPlan) -> TaskBook | None:
        """The book of a turn: its user sets the tasks, in its forum topic; the model's
        set_timezone goes into its plan (stored with the turn)."""
        return self.book(
            incoming.conversation,
            plan.start.timezone,
            author=incoming.user_id,
            name=incoming.name,
            thread=incoming.thread,
            group=incoming.group,
            on_zone=plan.set_timezone,
        )

    def book(
        self,
        conversation: ConversationId,
        own_zone: str | None,
        *,
        author: int | None = None,
        name: str | None = None,
        thread: int | None = None,
        group: bool = False,
        on_zone: Callable[[str], bool] = _not_kept,
    ) -> TaskBook | None:
        """The turn's book; None where tasks are not offered: with TASKS off, and outside
        Telegram (an HTTP API session has no way to be reached later)."""
        if not self.options.enabled or conversation.namespace != TELEGRAM:
            return None
        return TaskBook(
            store=self.store,
            chat=conversation.chat_id,
            zone=chat_zone(own_zone, self.options.timezone),
            options=self.options,
            author=author,
            name=name,
            thread=thread,
            group=group,
            admins=self.admins,
            clock=self.clock,
            on_zone=on_zone,
        )
