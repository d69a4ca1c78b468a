"""The sessions' background sweep: expired API sessions removed every so often, by a task
the API server owns (started with it, cancelled and awaited on close).

A session this process answered less than a TTL ago (`Sessions.answered`: when that turn
began) has not expired, whatever other processes did since (they only renew a session), so
its meta is not read: reading every session's each minute cost ~0.3 ms of CPU apiece, a
burst of tens of ms at a few hundred sessions."""

from __future__ import annotations

import asyncio
import logging

from membot.core.sessions import Sessions
from membot.errors import ConversationBusy
from membot.ids import API
from membot.memory.contract.repository import StorageUnavailable
from membot.tasks import stopped

log = logging.getLogger(__name__)


def sweep_interval(ttl: float) -> float:
    """How often expired sessions are looked for: at least once a minute, and at least twice
    per TTL so that none outlives it by much."""
    return min(60.0, ttl / 2)


class SessionSweeper:
    """The background sweep: `Sessions.sweep` every `interval` seconds until closed.

    `wait_for_sweep()` lets a caller (a test) wait for a whole sweep that began after it
    asked, instead of sleeping for a guessed time."""

    def __init__(self, sessions: Sessions, interval: float) -> None:
        self.sessions = sessions
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._started = 0
        self._done = 0
        self._cond = asyncio.Condition()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="membot-session-sweep")

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            await stopped(task)
            await asyncio.gather(task, return_exceptions=True)

    @property
    def sweeps(self) -> int:
        """How many sweeps have finished."""
        return self._done

    async def wait_for_sweep(self, timeout: float = 10.0) -> None:
        target = self._started + 1
        async with asyncio.timeout(timeout), self._cond:
            await self._cond.wait_for(lambda: self._done >= target)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)  # the sweep's period, not synchronisation
            self._started += 1
            try:
                await sweep(self.sessions)
            except Exception as exc:
                # Storage trouble: try again next time rather than stop sweeping for good.
                log.warning("session sweep failed: %s", type(exc).__name__)
            async with self._cond:
                self._done += 1
                self._cond.notify_all()


async def sweep(sessions: Sessions) -> int:
    """Reset every expired session; how many were. A session in use is not idle."""
    removed = 0
    now = sessions.clock()
    answered = sessions.answered
    for cid, began in list(answered.items()):
        if now - began > sessions.ttl:
            del answered[cid]
    repository = sessions.repository
    for cid in await repository.conversations(API):
        if cid in answered:
            continue  # answered here less than a TTL ago
        try:
            if not sessions.stale(await repository.get_meta(cid)):
                continue
            async with sessions.service.exclusive(cid):
                # Looked at again under its turn: a request may have just renewed it.
                if sessions.stale(await repository.get_meta(cid)):
                    await sessions.service.reset(cid)
                    removed += 1
        except ConversationBusy:
            continue
        except StorageUnavailable:
            break  # the storage went down (already reported): the next sweep goes on
    if removed:
        log.info("sessions: %d expired session(s) removed", removed)
    return removed
