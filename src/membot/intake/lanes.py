"""The runner's updates in hand, in lanes: one per chat, whose updates run one after another
in update_id order; lanes run side by side. Each update is given to `run` (the runner's
`_handle`); once its lane lets it go (handled, left, or never started), `let_go` is told.

An album's parts (one update each) are gathered into the turn of its first: `gather`."""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

from membot.intake.contract import Entry

log = logging.getLogger(__name__)


def report(task: asyncio.Task[None]) -> None:
    """A background task that ended by an error says so (it is awaited only at shutdown)."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("intake: %s ended by %s", task.get_name(), type(exc).__name__, exc_info=exc)


class Lanes:
    def __init__(
        self,
        run: Callable[[Entry], Awaitable[None]],
        let_go: Callable[[Entry], None],
        *,
        stopping: asyncio.Event,
        freed: asyncio.Event,
    ) -> None:
        self._run = run
        self._let_go = let_go
        self._stopping = stopping  # set: a lane starts no more updates
        self._freed = freed  # set whenever a lane ends (room for more)
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._ids: set[tuple[int, str]] = set()
        self._lanes: dict[str, deque[Entry]] = {}
        self._arrived: dict[str, asyncio.Event] = {}  # set when a lane gets an update

    def __len__(self) -> int:
        """Updates in hand, started or not."""
        return len(self._ids)

    def add(self, entry: Entry) -> None:
        """Into its chat's lane; an update already in hand (read again) is let go at once."""
        if entry.ref in self._ids:
            self._let_go(entry)
            return
        self._ids.add(entry.ref)
        key = entry.chat or f"#{entry.update_id}"
        lane = self._lanes.setdefault(key, deque())
        # In update_id order among Telegram's not started (a webhook may deliver out of order),
        # after whatever came before from elsewhere: a due task (a negative id, from the clock,
        # schedule/models.py) keeps its place in arrival order.
        start = 1 if key in self.tasks else 0
        waiting = list(lane)[start:]
        for i in range(len(waiting) - 1, -1, -1):
            if waiting[i].update_id < 0:
                start += i + 1
                waiting = waiting[i + 1 :]
                break
        if entry.update_id < 0:
            lane.append(entry)
        else:
            ids = [e.update_id for e in waiting]
            lane.insert(start + bisect.bisect(ids, entry.update_id), entry)
        self._arrived.setdefault(key, asyncio.Event()).set()
        if key not in self.tasks:
            task = asyncio.create_task(self._drain(key), name=f"lane-{key}")
            task.add_done_callback(report)
            self.tasks[key] = task

    def drop_queued(self, shard: int) -> None:
        """The shard's updates not started yet are let go (left pending in Redis)."""
        for lane in self._lanes.values():
            keep = [e for i, e in enumerate(lane) if i == 0 or e.shard != shard]
            for entry in lane:
                if entry not in keep:
                    self.release(entry)
            lane.clear()
            lane.extend(keep)

    async def _drain(self, key: str) -> None:
        lane = self._lanes[key]
        try:
            while lane and not self._stopping.is_set():
                entry = lane[0]
                try:
                    await self._run(entry)
                finally:
                    lane.popleft()
                    self.release(entry)
        finally:
            for entry in lane:  # not started: left pending for the shard's next holder
                self.release(entry)
            lane.clear()
            del self._lanes[key]
            del self.tasks[key]
            self._arrived.pop(key, None)
            self._freed.set()

    async def gather(
        self, entry: Entry, same: Callable[[Entry], bool], quiet: float
    ) -> list[Entry]:
        """The updates right after `entry` (its lane's head, started) for which `same` holds,
        taken out of the lane once none more has come for `quiet` seconds: the other parts
        of an album, which Telegram sends as separate updates close together. They stay in
        hand: the caller releases each (`release`) once it is handled."""
        key = entry.chat or f"#{entry.update_id}"
        lane = self._lanes[key]
        arrived = self._arrived.setdefault(key, asyncio.Event())

        def parts() -> list[Entry]:
            return list(itertools.takewhile(same, itertools.islice(lane, 1, None)))

        count, last = len(parts()), time.monotonic()
        while not self._stopping.is_set():
            remaining = last + quiet - time.monotonic()
            if remaining <= 0:
                break
            arrived.clear()
            try:
                await asyncio.wait_for(arrived.wait(), remaining)
            except TimeoutError:
                break
            if len(parts()) > count:  # another part: wait again from now
                count, last = len(parts()), time.monotonic()
        taken = parts()
        for _ in taken:
            del lane[1]
        return taken

    def release(self, entry: Entry) -> None:
        """An update is let go: handled, left, or taken out of its lane by `gather` and
        handled there."""
        self._ids.discard(entry.ref)
        self._let_go(entry)
