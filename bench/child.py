"""membot as a process of its own (`python -m membot ROLE`), beside the fakes in the bench's
process, and the CPU it spends: what a figure "membot's own CPU" counts, without the fake model
writing its chunks or the fake Telegram taking its requests.

The CPU is the sum over the process's threads of the time the scheduler ran them
(`/proc/<pid>/task/*/schedstat`, nanoseconds; the asyncio executor's threads live as long as
the process, so none is lost between two readings). `/proc/<pid>/stat`'s utime + stime
would count threads gone too, but in ticks of 10 ms: too coarse for a round of ten plain
answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

READY_TIMEOUT = 60.0


def cpu_seconds(pid: int) -> float:
    """The CPU time process `pid`'s live threads have used so far, seconds."""
    total = 0
    task_dir = Path(f"/proc/{pid}/task")
    for task in task_dir.iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):  # a thread that just ended
            continue
    return total / 1e9


class Child:
    """A running membot process: its pid and a CPU meter."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.pid = process.pid

    def cpu(self) -> float:
        return cpu_seconds(self.pid)


@contextlib.asynccontextmanager
async def membot_child(
    role: str,
    env: dict[str, str],
    cwd: Path,
    ready: Callable[[], Awaitable[None]],
) -> AsyncIterator[Child]:
    """`python -m membot ROLE` with `env`, run from `cwd`; yielded once `ready()` returned
    (it raises if the process ends first), stopped with SIGTERM (and waited for) after."""
    log = cwd / f"membot-{role}-{time.monotonic_ns()}.log"
    with log.open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "membot",
            role,
            cwd=cwd,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=err,
        )
    try:
        waiting = asyncio.ensure_future(ready())
        ended = asyncio.ensure_future(process.wait())
        await asyncio.wait({waiting, ended}, timeout=READY_TIMEOUT, return_when="FIRST_COMPLETED")
        if not waiting.done():
            waiting.cancel()
            ended.cancel()
            raise RuntimeError(f"membot {role} did not start:\n{log.read_text()[-3000:]}")
        ended.cancel()
        waiting.result()
        yield Child(process)
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()
