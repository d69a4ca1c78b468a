"""The one contract every task backend keeps (files, Redis, in memory).

Besides a chat's tasks, a store keeps an index of when to look at each task next: its due
time, or later while a firing of it is in flight (`hold`). `due(now)` and `next_time()` read
that index and never a whole chat's file or hash; the due index is what the intake's clock
source walks.

A firing is exactly once because of `advance`: a task's turn moves it from the time it was
due to its next time (or removes it) only if it is still at that time, in one step. Every
method is safe to call concurrently from one process; the Redis backend also across
processes. Failures that pass raise StorageUnavailable."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from membot.schedule.models import Task


@runtime_checkable
class TaskStore(Protocol):
    async def start(self) -> None:
        """Ready to serve `due` (the file backend builds its index of due times here, from
        every chat's tasks.json; until it has, `due` finds nothing)."""
        ...

    async def add(self, task: Task, limit: int) -> bool:
        """Keep a new task; False when its chat has `limit` tasks already (the count and the
        write are one step)."""
        ...

    async def get(self, chat: int, task_id: str) -> Task | None: ...

    async def tasks(self, chat: int) -> list[Task]:
        """The chat's tasks, soonest first."""
        ...

    async def remove(self, chat: int, task_id: str) -> Task | None:
        """Drop a task; the task dropped, None when there was none."""
        ...

    async def advance(
        self, chat: int, task_id: str, due: datetime, next_due: datetime | None
    ) -> bool:
        """If the task is still due at `due`: move it to `next_due`, or remove it (None).
        True when it did; False when the task is gone or was moved already."""
        ...

    async def clear(self, chat: int) -> int:
        """Drop every task of the chat (/reset); how many."""
        ...

    async def due(self, now: datetime, limit: int) -> list[Task]:
        """Tasks whose time has come (due, and not held past `now`), soonest first."""
        ...

    async def hold(self, task: Task, until: datetime) -> None:
        """Its firing (the task at `task.due`) is in flight: `due` leaves the task out until
        `until` unless it is moved first (a firing that got lost is put again then; its turn
        runs at most once). The later of two holds wins. Only a task still at `task.due` is
        held: one gone or moved on (its turn may be over before the hold comes) is neither
        brought sooner nor kept from its next time."""
        ...

    async def hold_all(self, tasks: Sequence[Task], until: datetime) -> None:
        """`hold` for each of these tasks, in one go (the clock holds a whole batch)."""
        ...

    async def next_time(self) -> datetime | None:
        """The earliest time `due` may find something, None when there is no task."""
        ...

    async def chats(self) -> list[int]:
        """Every chat that has tasks (`membot migrate`)."""
        ...

    async def put_all(self, tasks: Sequence[Task]) -> None:
        """Keep these tasks as they are, replacing any with the same id (`membot migrate`)."""
        ...

    async def close(self) -> None: ...
