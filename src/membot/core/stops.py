"""Stopping an answer while it is written (Telegram's Stop button on a draft).

A front door that shows an answer as it is written registers it here under (chat id, draft
id) for the time it is written, and hands the turn the `asyncio.Event` it gets back (the
sink's `stop`, core/turn.py `StoppableSink`). Pressing Stop sets that event: the model's
stream is closed at once and what it wrote so far becomes the answer, stored marked as
stopped and then sent, as any answer (core/steps.py).

The stop is a `Stop`: an asyncio.Event that also cancels, as it is set, the work
`until_stopped` runs for it (no task waits on the event).

The registry is this process's: the stop reaches the turn through the intake's control path
(intake/runner.py), in every process that runs turns; only the one running that answer finds
it here. A stop for an answer not (or no longer) in progress is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class Stop(asyncio.Event):
    """An answer's stop signal: an asyncio.Event whose `set` also cancels at once the work
    `until_stopped` runs for it."""

    def __init__(self) -> None:
        super().__init__()
        self._hooks: list[Callable[[], object]] = []

    def set(self) -> None:
        if self.is_set():
            return
        super().set()
        for hook in self._hooks.copy():
            hook()

    def hook(self, callback: Callable[[], object]) -> None:
        """Call `callback` as the stop is set (until `unhook`)."""
        self._hooks.append(callback)

    def unhook(self, callback: Callable[[], object]) -> None:
        self._hooks.remove(callback)


class Stops:
    """Answers being written in this process, by (chat id, draft id)."""

    def __init__(self) -> None:
        self._live: dict[tuple[int, int], Stop] = {}

    @contextlib.contextmanager
    def register(self, chat_id: int, draft_id: int) -> Iterator[Stop]:
        """The answer's stop signal, for as long as the answer is written."""
        key = (chat_id, draft_id)
        event = Stop()
        self._live[key] = event
        try:
            yield event
        finally:
            if self._live.get(key) is event:
                del self._live[key]

    def stop(self, chat_id: int, draft_id: int) -> bool:
        """Stop that answer; False when it is not being written here (ignored)."""
        event = self._live.get((chat_id, draft_id))
        if event is None:
            log.debug(
                "chat %s: stop for draft %s, not in progress here: ignored", chat_id, draft_id
            )
            return False
        log.info("chat %s: the user stopped the answer being written", chat_id)
        event.set()
        return True

    def __len__(self) -> int:
        return len(self._live)


async def until_stopped(work: Awaitable[_T], stop: Stop) -> _T | None:
    """Run `work` until it ends or `stop` is set, whichever comes first: its result, or None
    once stopped (`work` then cancelled and awaited: a model stream closes its HTTP
    request as it is cancelled). A result ready as the stop comes wins: the work was done.
    Cancelling the caller cancels the work too (and is raised once the work has ended)."""
    task = asyncio.ensure_future(work)
    cancel = task.cancel
    if stop.is_set():
        cancel()
    stop.hook(cancel)
    caller = asyncio.current_task()
    before = caller.cancelling() if caller is not None else 0
    try:
        # The work's own cleanup (closing the stream) is done before this returns or raises.
        result = await task
    except asyncio.CancelledError:
        if task.cancelled() and not _cancelled(caller, before):
            return None  # stopped, not cancelled from outside
        raise
    finally:
        stop.unhook(cancel)
    if _cancelled(caller, before):
        # The work ran on to its end though cancelled with the caller (on Python 3.11,
        # asyncio.wait_for returns its work's result when both come at once): the caller's
        # cancellation is still raised.
        raise asyncio.CancelledError
    return result


def _cancelled(caller: asyncio.Task[object] | None, before: int) -> bool:
    return caller is not None and caller.cancelling() > before
