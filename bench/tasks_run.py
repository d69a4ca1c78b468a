"""The tasks bench's `membot run` process against one store (bench/tasks.py's cases): started
against the fakes, ready at its first `getUpdates`, its due index built when the sentinel task's
message arrives (bench/tasks_data.py), stopped at the end of the block."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import tasks_data as data
from bench.core import process_env

READY_TIMEOUT = 60.0
INDEX_TIMEOUT = 180.0


@dataclass
class Case:
    """One store a process is started against: its backend, whether it holds the pending
    tasks, the settings that point membot at it, and the bench's own handle on it."""

    backend: str
    loaded: bool
    settings: dict[str, Any]
    store: Any
    workdir: Path
    redis: data.RedisServer | None = None
    runs: list[dict[str, float]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.backend}, {'with tasks' if self.loaded else 'without tasks'}"


@dataclass
class Running:
    proc: asyncio.subprocess.Process
    started: float  # time.monotonic() at exec
    ready: float  # seconds from exec to the first getUpdates


@contextlib.asynccontextmanager
async def membot(tg: Any, llm_url: str, case: Case, **overrides: Any) -> AsyncIterator[Running]:
    """`membot run` against the fakes and the case's store, until the block exits."""
    env = process_env(tg, llm_url, **{**case.settings, **overrides})
    log = case.workdir / "membot.stderr"
    polls = tg.call_count("getUpdates")
    started = time.monotonic()
    with log.open("ab") as stderr:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "membot",
            "run",
            cwd=case.workdir,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        try:
            await tg.wait_for_call("getUpdates", timeout=READY_TIMEOUT, count=polls + 1)
        except AssertionError:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(
                f"tasks bench: membot did not start ({case.name}):\n{tail}"
            ) from None
        yield Running(proc, started, time.monotonic() - started)
    finally:
        if proc.returncode is None:
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 60)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def wait_index(tg: Any, running: Running, case: Case) -> float:
    """Seconds from exec to the sentinel task's message: the due index is built."""
    try:
        await tg.wait_for_messages(data.SENTINEL_CHAT, 1, timeout=INDEX_TIMEOUT)
    except AssertionError:
        tail = (case.workdir / "membot.stderr").read_text(errors="replace")[-2000:]
        raise RuntimeError(
            f"tasks bench: the due index was not built ({case.name}):\n{tail}"
        ) from None
    return time.monotonic() - running.started
