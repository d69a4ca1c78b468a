"""The tasks bench's data: many pending tasks written through the store backends themselves
(src/membot/schedule/files.py, src/membot/schedule/redis.py), the burst of tasks due at one
time, and a Redis server of the bench's own (so its memory and CPU are the tasks' alone).

Every task here is a private chat's, set by its user, in UTC; every other one repeats daily,
as a store holds a mix of reminders and routines.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.child import cpu_seconds
from bench.core import free_port
from membot.clock import utc_now
from membot.schedule.models import Task

# The chats with pending tasks are FIRST_CHAT on; the burst's are the first of them.
FIRST_CHAT = 7_100_001
# One task due at start in a chat of its own: its message says the due index is built.
SENTINEL_CHAT = 7_099_999
# Tasks put in one call (the store's put_all): a batch per few hundred chats.
BATCH = 2_000
AT_ONCE = 4


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """A child's resident memory now (VmRSS) or at its peak (VmHWM), MiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for process {pid}")


def _task(task_id: str, chat: int, text: str, due: datetime, daily: bool) -> Task:
    created = utc_now()
    return Task(
        id=task_id,
        chat=chat,
        text=text,
        due=due,
        zone="UTC",
        created=created,
        author=chat,
        repeat="FREQ=DAILY" if daily else None,
        anchor=due.replace(tzinfo=None).isoformat(timespec="seconds") if daily else None,
    )


def pending(chats: int, per_chat: int) -> Iterator[Task]:
    """`per_chat` tasks in each of `chats` chats, due far in the future (30 days on, a minute
    apart), so none is due while the bench runs."""
    start = utc_now().replace(microsecond=0) + timedelta(days=30)
    for c in range(chats):
        chat = FIRST_CHAT + c
        for k in range(per_chat):
            n = c * per_chat + k
            due = start + timedelta(minutes=n)
            yield _task(f"p{n:07d}", chat, f"pending task {n}: water the plants", due, n % 2 == 0)


def burst(chats: int, due: datetime, tag: int) -> list[Task]:
    """One task in each of the first `chats` chats, all due at `due`; each one's text names
    its chat and run, so its message is told from any other."""
    return [
        _task(f"b{tag % 10}{c:06d}", FIRST_CHAT + c, burst_text(FIRST_CHAT + c, tag), due, False)
        for c in range(chats)
    ]


def burst_text(chat: int, tag: int) -> str:
    return f"burst {tag} chat {chat}: remind me to stretch"


def sentinel() -> Task:
    """Due now: its turn runs as soon as the process's due index is built."""
    return _task("s0000001", SENTINEL_CHAT, "sentinel: say the index is built", utc_now(), False)


async def put(store: Any, tasks: Sequence[Task] | Iterator[Task]) -> int:
    """Write tasks through the store's own put_all, BATCH at a time and a few batches at once
    (the file store writes a chat at a time, each file synced: its worker threads overlap
    the syncs); how many. The tasks come in chat order, so a chat is in one batch."""
    batches: list[list[Task]] = [[]]
    for task in tasks:
        if len(batches[-1]) >= BATCH and task.chat != batches[-1][-1].chat:
            batches.append([])
        batches[-1].append(task)
    for start in range(0, len(batches), AT_ONCE):
        await asyncio.gather(*(store.put_all(b) for b in batches[start : start + AT_ONCE] if b))
    return sum(len(b) for b in batches)


def file_store(data_dir: Path) -> Any:
    from membot.schedule.files import FileTaskStore

    return FileTaskStore(data_dir)


def redis_store(client: Any, prefix: str) -> Any:
    from membot.schedule.redis import RedisTaskStore

    return RedisTaskStore(client, prefix)


def disk_mib(data_dir: Path, name: str = "tasks.json") -> float:
    """What the chats' task files take on disk (their sizes), MiB."""
    return sum(p.stat().st_size for p in data_dir.glob(f"*/{name}")) / 2**20


@dataclass
class RedisServer:
    url: str
    pid: int
    client: Any

    async def used_mib(self) -> float:
        info = await self.client.info("memory")
        return float(info["used_memory"]) / 2**20

    def cpu(self) -> float:
        return cpu_seconds(self.pid)


@contextlib.asynccontextmanager
async def private_redis() -> AsyncIterator[RedisServer | None]:
    """A redis-server of the bench's own on a free port (no persistence, nothing else on it),
    stopped afterwards; None (with a line on stderr) when there is no redis-server."""
    from membot.redis.client import create_client

    exe = shutil.which("redis-server")
    if exe is None:
        print("  tasks: no redis-server on PATH: Redis figures skipped", file=sys.stderr)
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="membot-bench-redis-") as tmp:
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            tmp,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        client = create_client(url)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    await client.ping()
                    break
                except Exception:
                    if time.monotonic() > deadline or proc.returncode is not None:
                        raise RuntimeError("the bench's redis-server did not start") from None
                    await asyncio.sleep(0.05)  # the server is starting: poll, bounded
            yield RedisServer(url, proc.pid, client)
        finally:
            await client.aclose()
            if proc.returncode is None:
                proc.terminate()
            await proc.wait()
