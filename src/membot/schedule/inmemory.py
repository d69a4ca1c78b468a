"""Tasks in this process's memory: for tests and STORAGE-less set-ups; lost with the process."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from membot.schedule.models import Task


class InMemoryTaskStore:
    def __init__(self) -> None:
        self._tasks: dict[int, dict[str, Task]] = {}
        self._held: dict[tuple[int, str], datetime] = {}
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        return None

    async def add(self, task: Task, limit: int) -> bool:
        async with self._lock:
            chat = self._tasks.setdefault(task.chat, {})
            if len(chat) >= limit:
                return False
            chat[task.id] = task
            return True

    async def get(self, chat: int, task_id: str) -> Task | None:
        return self._tasks.get(chat, {}).get(task_id)

    async def tasks(self, chat: int) -> list[Task]:
        return sorted(self._tasks.get(chat, {}).values(), key=lambda t: (t.due, t.id))

    async def remove(self, chat: int, task_id: str) -> Task | None:
        async with self._lock:
            self._held.pop((chat, task_id), None)
            return self._tasks.get(chat, {}).pop(task_id, None)

    async def advance(
        self, chat: int, task_id: str, due: datetime, next_due: datetime | None
    ) -> bool:
        async with self._lock:
            task = self._tasks.get(chat, {}).get(task_id)
            if task is None or task.due != due:
                return False
            self._held.pop((chat, task_id), None)
            if next_due is None:
                del self._tasks[chat][task_id]
            else:
                self._tasks[chat][task_id] = task.moved(next_due)
            return True

    async def clear(self, chat: int) -> int:
        async with self._lock:
            dropped = self._tasks.pop(chat, {})
            for task_id in dropped:
                self._held.pop((chat, task_id), None)
            return len(dropped)

    def _look_at(self, task: Task) -> datetime:
        held = self._held.get((task.chat, task.id))
        return max(task.due, held) if held is not None else task.due

    async def due(self, now: datetime, limit: int) -> list[Task]:
        found = [
            t for chat in self._tasks.values() for t in chat.values() if self._look_at(t) <= now
        ]
        return sorted(found, key=lambda t: (t.due, t.id))[:limit]

    async def hold(self, task: Task, until: datetime) -> None:
        stored = await self.get(task.chat, task.id)
        if stored is not None and stored.due == task.due:
            held = self._held.get((task.chat, task.id))
            self._held[(task.chat, task.id)] = until if held is None else max(held, until)

    async def hold_all(self, tasks: Sequence[Task], until: datetime) -> None:
        for task in tasks:
            await self.hold(task, until)

    async def next_time(self) -> datetime | None:
        times = [self._look_at(t) for chat in self._tasks.values() for t in chat.values()]
        return min(times, default=None)

    async def chats(self) -> list[int]:
        return sorted(chat for chat, tasks in self._tasks.items() if tasks)

    async def put_all(self, tasks: Sequence[Task]) -> None:
        async with self._lock:
            for task in tasks:
                self._tasks.setdefault(task.chat, {})[task.id] = task

    async def close(self) -> None:
        return None
