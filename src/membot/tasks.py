"""Background work that the process owns: started here, awaited on shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Collection, Coroutine, Hashable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class TaskSupervisor:
    """Owns fire-and-forget tasks: at most one per key, errors logged, all awaited on close."""

    def __init__(self) -> None:
        self._tasks: dict[Hashable, asyncio.Task[Any]] = {}
        self._closing = False

    def spawn(self, key: Hashable, coro: Coroutine[Any, Any, Any]) -> bool:
        """Start `coro` unless a task with this key is still running. True if started."""
        if self._closing or key in self._tasks:
            coro.close()
            return False
        task = asyncio.create_task(coro, name=f"membot:{key}")
        self._tasks[key] = task
        task.add_done_callback(lambda t: self._done(key, t))
        return True

    def _done(self, key: Hashable, task: asyncio.Task[Any]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled() and (exc := task.exception()) is not None:
            # The traceback may quote conversation text (a summary's prompt): DEBUG only.
            log.error(
                "background task %s failed: %s",
                key,
                type(exc).__name__,
                exc_info=exc if log.isEnabledFor(logging.DEBUG) else None,
            )

    async def cancel(self, key: Hashable) -> None:
        """Stop the task with this key, if any, and wait until it has stopped."""
        task = self._tasks.get(key)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def join(self) -> None:
        """Wait for every task running now."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def close(self, timeout: float = 30.0, hurry: asyncio.Event | None = None) -> None:
        """Refuse new tasks, let running ones finish for up to `timeout` (or until `hurry` is
        set), cancel the rest."""
        self._closing = True
        still = await hurried_wait(list(self._tasks.values()), timeout, hurry)
        for task in still:
            task.cancel()
        if still:
            log.warning("cancelled %d background task(s) at shutdown", len(still))
            await asyncio.gather(*still, return_exceptions=True)

    def __len__(self) -> int:
        return len(self._tasks)


# Seconds between two cancellations of a task being stopped that still runs (see `stopped`).
RECANCEL = 0.25


async def stopped(task: asyncio.Task[Any]) -> None:
    """Cancel `task` and wait until it has ended, cancelling it again while it runs on: on
    Python 3.11 a cancellation that comes just as an `asyncio.wait_for` finishes its work is
    lost (the wait returns the work's result instead; redis-py wraps each of its writes in
    one), and a loop stopped by a single cancellation would run for ever, its owner waiting
    for it. Whatever the task ended with is left to the caller (`await task` raises it)."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=RECANCEL)


async def to_the_end(work: Awaitable[_T]) -> _T:
    """`work` run to its end even when the caller is cancelled meanwhile; the cancellation is
    raised once it has ended (its own failure then dropped: nobody is left to hear it). For
    what must not be left half done: a turn being stored (core/agent.py)."""
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})  # cancelling this wait leaves the task running
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: no "never retrieved" warning
        raise cancelled
    return task.result()


async def hurried_wait(
    tasks: Collection[asyncio.Task[Any]], timeout: float, hurry: asyncio.Event | None = None
) -> set[asyncio.Task[Any]]:
    """Wait until `tasks` have ended, `timeout` has passed or `hurry` is set (a second
    signal at shutdown); the tasks still running, left to the caller."""
    if not tasks:
        return set()
    waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(asyncio.wait(tasks))}
    if hurry is not None:
        waiters.add(asyncio.ensure_future(hurry.wait()))
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:  # only the waits end: the tasks themselves go on
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
    return {task for task in tasks if not task.done()}
