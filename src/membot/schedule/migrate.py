"""`membot migrate` for tasks: every chat's tasks copied between the files and the Redis
backends, after the conversations (memory/migrate/run.py runs it, given by the command:
membot.memory and membot.schedule do not import each other).

Idempotent like the conversations' copy: a task the target holds as it is is skipped, so a
second run copies nothing; one the target holds otherwise (the bot ran on the target since)
is left alone and reported, unless `overwrite`. A task the target has and the source has not
stays. Holds of firings in flight are not copied: a task due is due on the target too, and
its turn runs once (`TaskStore.advance`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from membot.redis.client import Redis, create_client
from membot.schedule.files import FileTaskStore
from membot.schedule.redis import RedisTaskStore
from membot.schedule.store import TaskStore


class Where(Protocol):
    """The settings a copy needs (memory/migrate/run.py's StorageConfig has them)."""

    @property
    def data_dir(self) -> Path: ...

    @property
    def redis_url(self) -> str: ...

    @property
    def redis_prefix(self) -> str: ...


@dataclass
class TaskReport:
    chats: int = 0
    copied: int = 0
    skipped: int = 0
    conflicts: list[str] = field(default_factory=list)  # "task <chat>:<id>"


async def copy_tasks(
    source: TaskStore, target: TaskStore, *, overwrite: bool = False
) -> TaskReport:
    report = TaskReport()
    for chat in await source.chats():
        report.chats += 1
        there = {task.id: task for task in await target.tasks(chat)}
        missing = []
        for task in await source.tasks(chat):
            held = there.get(task.id)
            if held == task:
                report.skipped += 1
            elif held is not None and not overwrite:
                report.conflicts.append(f"task {chat}:{task.id}")
            else:
                missing.append(task)
        if missing:
            await target.put_all(missing)  # as they are: no limit, as the source kept them
            report.copied += len(missing)
    return report


def _open(kind: str, where: Where) -> tuple[TaskStore, Redis | None]:
    if kind == "files":
        return FileTaskStore(where.data_dir), None
    client = create_client(where.redis_url)
    return RedisTaskStore(client, where.redis_prefix), client


def task_copy(
    source: str, target: str, *, overwrite: bool = False
) -> Callable[[Where], Awaitable[tuple[str, list[str]]]]:
    """The copy `membot migrate --from source --to target` makes of the tasks: its line of
    the report, and the tasks it left alone."""

    async def copy(where: Where) -> tuple[str, list[str]]:
        (src, src_client), (dst, dst_client) = _open(source, where), _open(target, where)
        try:
            report = await copy_tasks(src, dst, overwrite=overwrite)
        finally:
            for store, client in ((src, src_client), (dst, dst_client)):
                await store.close()
                if client is not None:
                    await client.aclose()
        line = (
            f"migrated {source} -> {target}: tasks of {report.chats} chats "
            f"({report.copied} copied, {report.skipped} skipped as already there, "
            f"{len(report.conflicts)} conflicting)"
        )
        return line, report.conflicts

    return copy
