"""Tasks in plain files (`STORAGE=files`): each chat's in DATA_DIR/<chat id>/tasks.json
(schedule/taskfile.py), an index of when to look at them in memory (schedule/index.py).

`start()` builds the index from every chat's file, in a worker thread; what is added, moved
or removed meanwhile is in the index at once, and the scan's finding for those chats is
left out (it may have read them before). `due(now)` reads the files of the chats whose time
has come, and nothing else. All file work runs in worker threads; a chat's writes are one at
a time (its lock), so `add`'s count and its write are one step. One process only, as the
rest of the file backend.

A chat's memory may be reset without its tasks (FileRepository.reset removes its directory)
or with them, in either order: a chat whose file is gone reads as no tasks, and `due` finding
a chat's entry out of step with its file works the entry out again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from membot.clock import iso
from membot.locks import KeyedLocks
from membot.schedule.index import DueIndex
from membot.schedule.models import Task
from membot.schedule.taskfile import read_tasks, scan, tasks_path, write_tasks

log = logging.getLogger(__name__)

_T = TypeVar("_T")
# A change's result, and the chat's tasks after it.
_Changed = tuple[_T, list[Task]]

READ_BATCH = 64  # chats' files read per worker thread by `due`


def soonest(tasks: Sequence[Task]) -> list[Task]:
    return sorted(tasks, key=lambda t: (t.due, t.id))


class FileTaskStore:
    def __init__(self, data_dir: Path | str) -> None:
        self.root = Path(data_dir)
        self._locks = KeyedLocks()
        self._index = DueIndex()
        self._scan: asyncio.Future[None] | None = None
        self._touched: set[int] | None = None  # while scanning: chats changed meanwhile

    def path(self, chat: int) -> Path:
        return tasks_path(self.root, chat)

    async def start(self) -> None:
        if self._scan is None:
            self._touched = set()
            self._scan = asyncio.ensure_future(self._build())
        try:
            await asyncio.shield(self._scan)
        except Exception:
            self._scan = None  # the next start() scans again
            raise

    async def _build(self) -> None:
        try:
            found = await asyncio.to_thread(scan, self.root)
        finally:
            touched, self._touched = self._touched or set(), None
        for chat, at in found.items():
            if chat not in touched:
                self._index.set(chat, at)
        log.info("tasks: %d chat(s) with tasks", len(self._index))

    async def _change(
        self,
        chat: int,
        fn: Callable[..., _Changed[_T]],
        *args: object,
        then: Callable[[_T, list[Task]], None] | None = None,
    ) -> _T:
        """Run a change of the chat's file in a worker thread under its lock, then (`then`,
        and) put the chat's tasks in the index. A cancelled caller cannot stop the thread:
        the lock is held until it is done, and what it did is in the index."""
        async with self._locks(chat):
            work = asyncio.ensure_future(asyncio.to_thread(fn, self.path(chat), chat, *args))
            try:
                result, tasks = await asyncio.shield(work)
            except asyncio.CancelledError:
                while not work.done():
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait({work})
                if not work.cancelled() and work.exception() is None:
                    self._keep(chat, *work.result(), then)
                raise
            self._keep(chat, result, tasks, then)
            return result

    def _keep(
        self,
        chat: int,
        result: _T,
        tasks: list[Task],
        then: Callable[[_T, list[Task]], None] | None,
    ) -> None:
        if then is not None:
            then(result, tasks)
        self._index.put(chat, tasks)
        if self._touched is not None:
            self._touched.add(chat)

    # -- the contract ----------------------------------------------------------------------

    async def add(self, task: Task, limit: int) -> bool:
        return await self._change(task.chat, _add, task, limit)

    async def get(self, chat: int, task_id: str) -> Task | None:
        tasks, _ = await asyncio.to_thread(read_tasks, self.path(chat), chat)
        return next((t for t in tasks if t.id == task_id), None)

    async def tasks(self, chat: int) -> list[Task]:
        tasks, _ = await asyncio.to_thread(read_tasks, self.path(chat), chat)
        return soonest(tasks)

    async def remove(self, chat: int, task_id: str) -> Task | None:
        return await self._change(chat, _remove, task_id)

    async def advance(
        self, chat: int, task_id: str, due: datetime, next_due: datetime | None
    ) -> bool:
        def release(done: bool, _: list[Task]) -> None:
            if done:
                self._index.release(chat, task_id)

        return await self._change(chat, _advance, task_id, iso(due), next_due, then=release)

    async def clear(self, chat: int) -> int:
        return await self._change(chat, _clear)

    async def due(self, now: datetime, limit: int) -> list[Task]:
        chats = self._index.due_chats(now) if limit > 0 else []
        found: list[Task] = []
        stale: list[int] = []
        for start in range(0, len(chats), READ_BATCH):
            batch = chats[start : start + READ_BATCH]
            read = await asyncio.to_thread(_read_all, self.root, batch)
            for chat, tasks in zip(batch, read, strict=True):
                ready = [t for t in tasks if self._index.look_at(t) <= now]
                if not ready:
                    stale.append(chat)  # reset, or changed while read: looked at again
                found.extend(ready)
            found = soonest(found)
            # A later chat's tasks are due no sooner than its entry.
            following = chats[start + READ_BATCH] if start + READ_BATCH < len(chats) else None
            if len(found) >= limit and (
                following is None or (self._index.at(following) or now) > found[limit - 1].due
            ):
                break
        for chat in stale:
            await self._change(chat, _read)
        return found[:limit]

    async def hold(self, task: Task, until: datetime) -> None:
        def held(_: None, tasks: list[Task]) -> None:
            if any(t.id == task.id and t.due == task.due for t in tasks):
                self._index.hold(task.chat, task.id, until)

        await self._change(task.chat, _read, then=held)

    async def hold_all(self, tasks: Sequence[Task], until: datetime) -> None:
        """One worker thread reads every chat's file, under the chats' locks (taken in order:
        nothing else takes two), instead of a thread hop per task."""
        by_chat: dict[int, list[Task]] = {}
        for task in tasks:
            by_chat.setdefault(task.chat, []).append(task)
        chats = sorted(by_chat)
        async with contextlib.AsyncExitStack() as held:
            for chat in chats:
                await held.enter_async_context(self._locks(chat))
            stored = await asyncio.to_thread(
                lambda: [read_tasks(self.path(c), c)[0] for c in chats]
            )
            for chat, now in zip(chats, stored, strict=True):
                at = {(t.id, t.due) for t in now}
                for task in by_chat[chat]:
                    if (task.id, task.due) in at:
                        self._index.hold(chat, task.id, until)

    async def next_time(self) -> datetime | None:
        return self._index.next_time()

    async def chats(self) -> list[int]:
        return sorted(await asyncio.to_thread(scan, self.root))

    async def put_all(self, tasks: Sequence[Task]) -> None:
        by_chat: dict[int, list[Task]] = {}
        for task in tasks:
            by_chat.setdefault(task.chat, []).append(task)
        for chat, kept in by_chat.items():
            await self._change(chat, _put, kept)

    async def close(self) -> None:
        return None


# -- the changes (worker threads): each returns its result and the chat's tasks after it -----


def _read(path: Path, chat: int) -> _Changed[None]:
    return None, read_tasks(path, chat)[0]


def _add(path: Path, chat: int, task: Task, limit: int) -> _Changed[bool]:
    tasks, readable = read_tasks(path, chat)
    if len(tasks) >= limit:
        return False, tasks
    tasks = [t for t in tasks if t.id != task.id] + [task]
    write_tasks(path, chat, tasks, readable=readable)
    return True, tasks


def _remove(path: Path, chat: int, task_id: str) -> _Changed[Task | None]:
    tasks, _ = read_tasks(path, chat)
    dropped = next((t for t in tasks if t.id == task_id), None)
    if dropped is None:
        return None, tasks
    tasks = [t for t in tasks if t.id != task_id]
    write_tasks(path, chat, tasks)
    return dropped, tasks


def _advance(
    path: Path, chat: int, task_id: str, due: str, next_due: datetime | None
) -> _Changed[bool]:
    tasks, _ = read_tasks(path, chat)
    task = next((t for t in tasks if t.id == task_id), None)
    if task is None or iso(task.due) != due:
        return False, tasks
    rest = [t for t in tasks if t.id != task_id]
    tasks = rest if next_due is None else [*rest, task.moved(next_due)]
    write_tasks(path, chat, tasks)
    return True, tasks


def _clear(path: Path, chat: int) -> _Changed[int]:
    tasks, _ = read_tasks(path, chat)
    write_tasks(path, chat, [])  # gone, a file that did not read too: /reset forgets all
    return len(tasks), []


def _put(path: Path, chat: int, kept: list[Task]) -> _Changed[None]:
    tasks, readable = read_tasks(path, chat)
    ids = {t.id for t in kept}
    tasks = [t for t in tasks if t.id not in ids] + kept
    write_tasks(path, chat, tasks, readable=readable)
    return None, tasks


def _read_all(root: Path, chats: list[int]) -> list[list[Task]]:
    return [read_tasks(tasks_path(root, chat), chat)[0] for chat in chats]
