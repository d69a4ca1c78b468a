"""`membot migrate` copies the chats' tasks both ways (files <-> Redis), after their
conversations, idempotently: a second run copies nothing, a task the target holds otherwise
is left alone and reported unless --overwrite. Redis at 127.0.0.1:6379 under the test's own
prefix (tests/unit/conftest.py `prefix`)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from membot.config import env_names
from membot.ids import ConversationId
from membot.memory import FileRepository, Message
from membot.redis.client import create_client
from membot.schedule.files import FileTaskStore
from membot.schedule.migrate import copy_tasks
from membot.schedule.models import Task, new_task_id
from membot.schedule.redis import RedisTaskStore

REDIS_URL = "redis://127.0.0.1:6379/0"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def task(chat: int, minutes: int, **kw: object) -> Task:
    return Task(
        new_task_id(),
        chat,
        f"task {minutes}",
        T0 + timedelta(minutes=minutes),
        "Europe/Berlin",
        created=T0 - timedelta(days=1),
        **kw,  # type: ignore[arg-type]
    )


TASKS = [
    task(5, 1, author=5, repeat="FREQ=DAILY", anchor="2026-03-01T10:01:00"),
    task(5, 2),
    task(-1001234567890, 3, author=7, name="Ann", thread=12),
]


@pytest.fixture
async def redis_store(prefix: str) -> AsyncIterator[RedisTaskStore]:
    client = create_client(REDIS_URL)
    yield RedisTaskStore(client, prefix)
    await client.aclose()


async def filled(data: Path) -> FileTaskStore:
    files = FileTaskStore(data)
    for t in TASKS:
        assert await files.add(t, 50)
    return files


async def everything(store: FileTaskStore | RedisTaskStore) -> list[Task]:
    """Every task the store has, soonest first."""
    found = [t for chat in await store.chats() for t in await store.tasks(chat)]
    return sorted(found, key=lambda t: (t.due, t.id))


async def test_tasks_are_copied_both_ways_idempotently(
    redis_store: RedisTaskStore, tmp_path: Path
) -> None:
    files = await filled(tmp_path / "data")
    report = await copy_tasks(files, redis_store)
    assert (report.chats, report.copied, report.skipped, report.conflicts) == (2, 3, 0, [])
    assert await everything(redis_store) == await everything(files)
    again = await copy_tasks(files, redis_store)
    assert (again.copied, again.skipped) == (0, 3)
    back = FileTaskStore(tmp_path / "back")
    assert (await copy_tasks(redis_store, back)).copied == 3
    assert (await copy_tasks(redis_store, back)).skipped == 3
    assert await everything(back) == await everything(files)
    # The copies are working stores: the clock finds what is due.
    restarted = FileTaskStore(tmp_path / "back")
    await restarted.start()
    assert await restarted.next_time() == T0 + timedelta(minutes=1)
    assert await restarted.due(T0 + timedelta(minutes=2), 10) == TASKS[:2]
    assert await redis_store.due(T0 + timedelta(minutes=2), 10) == TASKS[:2]


async def test_a_task_the_target_holds_otherwise_is_left_alone_unless_told(
    redis_store: RedisTaskStore, tmp_path: Path
) -> None:
    files = await filled(tmp_path / "data")
    await copy_tasks(files, redis_store)
    # The bot ran on Redis since: a task moved, another set there only.
    moved = TASKS[0].moved(T0 + timedelta(days=1))
    assert await redis_store.advance(5, moved.id, TASKS[0].due, moved.due)
    only_there = task(5, 30)
    await redis_store.add(only_there, 50)
    report = await copy_tasks(files, redis_store)
    assert (report.copied, report.skipped) == (0, 2)
    assert report.conflicts == [f"task 5:{moved.id}"]
    assert await redis_store.get(5, moved.id) == moved
    report = await copy_tasks(files, redis_store, overwrite=True)
    assert (report.copied, report.skipped, report.conflicts) == (1, 2, [])
    assert await redis_store.get(5, moved.id) == TASKS[0]
    assert await redis_store.get(5, only_there.id) == only_there  # a copy never removes


def migrate_env(tmp_path: Path, data: Path, prefix: str) -> dict[str, str]:
    names = set(env_names())
    env = {k: v for k, v in os.environ.items() if k.upper() not in names}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return {**env, "DATA_DIR": str(data), "REDIS_PREFIX": prefix, "REDIS_URL": REDIS_URL}


async def membot_migrate(
    tmp_path: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "membot", "migrate", *args]
    return await asyncio.to_thread(
        subprocess.run, command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )


async def test_membot_migrate_copies_the_tasks_with_the_conversations(
    redis_store: RedisTaskStore, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    await filled(data)
    memory = FileRepository(data)
    for chat in (5, -1001234567890):  # tasks are set in a chat's turns
        await memory.append(ConversationId.telegram(chat), [Message(role="user", content="hi")])
    there = migrate_env(tmp_path, data, redis_store.prefix)
    done = await membot_migrate(tmp_path, there, "--from", "files", "--to", "redis")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "migrated files -> redis: 2 conversations (2 copied, 0 skipped as already there, "
        "0 conflicting), 2 messages copied with 0 files",
        "migrated files -> redis: tasks of 2 chats (3 copied, 0 skipped as already there, "
        "0 conflicting)",
    ]
    assert await everything(redis_store) == TASKS
    # And back into an empty DATA_DIR: each chat's tasks beside its conversation.
    back = tmp_path / "back"
    home = migrate_env(tmp_path, back, redis_store.prefix)
    done = await membot_migrate(tmp_path, home, "--from", "redis", "--to", "files")
    assert done.returncode == 0, done.stderr
    assert "tasks of 2 chats (3 copied" in done.stdout
    assert sorted(p.name for p in (back / "5").iterdir()) == [
        "messages.txt",
        "meta.json",
        "tasks.json",
    ]
    assert await everything(FileTaskStore(back)) == TASKS
    # Again: nothing to copy, nothing in conflict.
    done = await membot_migrate(tmp_path, home, "--from", "redis", "--to", "files")
    assert done.returncode == 0, done.stderr
    assert "tasks of 2 chats (0 copied, 3 skipped as already there, 0 conflicting)" in done.stdout
    # A task moved on the target since: left alone and said, the status 1.
    moved = replace(TASKS[1], due=T0 + timedelta(days=2))
    await FileTaskStore(back).put_all([moved])
    done = await membot_migrate(tmp_path, home, "--from", "redis", "--to", "files")
    assert done.returncode == 1
    assert done.stderr == (
        f"membot migrate: left alone, the target holds a different copy: task 5:{moved.id} "
        "(--overwrite replaces them)\n"
    )
    done = await membot_migrate(tmp_path, home, "--from", "redis", "--to", "files", "--overwrite")
    assert done.returncode == 0, done.stderr
    assert await FileTaskStore(back).get(5, moved.id) == TASKS[1]
