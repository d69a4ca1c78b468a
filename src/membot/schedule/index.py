"""The file backend's index of when to look at each chat's tasks, small whatever their number.

One entry per chat with tasks: the earliest time one of them needs looking at (its due time,
or later while a firing of it is in flight), in a heap with lazy deletion: an entry is the
heap's (time, chat) while `_at[chat]` is that time; moving a chat pushes a new one, and the
stale ones are dropped as they surface, or all at once when they outnumber the live ones.
100,000 tasks over 10,000 chats are 10,000 entries.

The holds of firings in flight live here only: after a restart a held task is simply due
again, and its turn runs once because the store's `advance` moves it once.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from datetime import datetime

from membot.schedule.models import Task


class DueIndex:
    def __init__(self) -> None:
        self._at: dict[int, datetime] = {}
        self._heap: list[tuple[datetime, int]] = []
        self._held: dict[int, dict[str, datetime]] = {}  # chat -> task id -> until

    def __len__(self) -> int:
        return len(self._at)

    def at(self, chat: int) -> datetime | None:
        return self._at.get(chat)

    def look_at(self, task: Task) -> datetime:
        """When the task needs looking at: its due time, or its hold's end if later."""
        held = self._held.get(task.chat, {}).get(task.id)
        return task.due if held is None or held <= task.due else held

    def hold(self, chat: int, task_id: str, until: datetime) -> None:
        """Until `until` (or a later hold it has); `put` for the chat follows, with its
        tasks."""
        holds = self._held.setdefault(chat, {})
        held = holds.get(task_id)
        holds[task_id] = until if held is None else max(held, until)

    def release(self, chat: int, task_id: str) -> None:
        holds = self._held.get(chat)
        if holds is not None:
            holds.pop(task_id, None)
            if not holds:
                del self._held[chat]

    def put(self, chat: int, tasks: Iterable[Task]) -> None:
        """The chat's tasks, all of them, as its file now holds them: its entry is worked
        out again, and the holds of tasks it no longer has are dropped."""
        tasks = list(tasks)
        holds = self._held.get(chat)
        if holds is not None:
            ids = {task.id for task in tasks}
            for task_id in [t for t in holds if t not in ids]:
                del holds[task_id]
            if not holds:
                del self._held[chat]
        self.set(chat, min((self.look_at(task) for task in tasks), default=None))

    def set(self, chat: int, at: datetime | None) -> None:
        """The chat's entry as it is (a scan's finding for a chat nothing has held)."""
        if at is None:
            self._at.pop(chat, None)
            self._held.pop(chat, None)
            return
        if self._at.get(chat) == at:
            return
        self._at[chat] = at
        heapq.heappush(self._heap, (at, chat))
        if len(self._heap) > 2 * len(self._at) + 64:
            self._heap = [(when, c) for c, when in self._at.items()]
            heapq.heapify(self._heap)

    def due_chats(self, now: datetime) -> list[int]:
        """The chats with an entry at or before `now`, earliest first. Walks only the part
        of the heap at or before `now` (a heap's parent is never later than its children)."""
        found: list[tuple[datetime, int]] = []
        heap, stack = self._heap, [0] if self._heap else []
        while stack:
            i = stack.pop()
            at, chat = heap[i]
            if at > now:
                continue
            if self._at.get(chat) == at:
                found.append((at, chat))
            stack.extend(c for c in (2 * i + 1, 2 * i + 2) if c < len(heap))
        return list(dict.fromkeys(chat for _, chat in sorted(found)))  # a chat once

    def next_time(self) -> datetime | None:
        while self._heap and self._at.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None
