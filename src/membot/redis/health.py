"""The health of Redis: the one circuit breaker of a process (STORAGE=redis, QUEUE=local),
or the null object that is always up (QUEUE=redis, and no Redis at all).

membot.wiring builds one `RedisHealth` and hands it to every user of Redis that answers
through an outage: the repository (memory/outage/repository.py), the turn locks, the summary lease
and the usage ledger. It is closed (Redis is used) until a call fails or runs out of its
budget: then it opens, with one WARNING per outage, and from then on nobody waits on
Redis: users ask `available` first (or go through `call`, which refuses at once). Only a
background task probes: every `cooldown` seconds a PING; once Redis answers, the recovery
steps run (the spool is written back, in order) and only then does it close, with one INFO.

With QUEUE=redis there is no breaker: Redis is the queue too, and an update is not answered
without it (it waits in the stream, or in Telegram); see membot.wiring. Its users get
`AlwaysUp` then, so they ask the same questions either way: a failure reported to it leaves
it available, and a user that cannot go on without Redis raises StorageUnavailable.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from membot.errors import StorageUnavailable
from membot.redis.errors import FAILURES, UNREACHABLE, reason
from membot.tasks import stopped

log = logging.getLogger(__name__)
_T = TypeVar("_T")

COOLDOWN = 1.0  # seconds between two probes of a server that failed
CALL_BUDGET = 0.5  # seconds one call may take before the server counts as failed
# What a replay retries later: the server did not answer (StorageRefused, an error answer,
# refuses the change). What opens the breaker is any failure (errors.FAILURES): no answer,
# or an error answer (an OOM refusal, say).
TRANSIENT: tuple[type[BaseException], ...] = (StorageUnavailable, *UNREACHABLE)

Probe = Callable[[], Awaitable[object]]
# A step run once Redis answers again, before it is used: how many changes it wrote.
Recovery = Callable[[], Awaitable[int]]


class Health(Protocol):
    """Whether Redis may be used now, for a user of Redis that can do without it: it asks
    first and reports its failures."""

    @property
    def budget(self) -> float | None:
        """Seconds one call may take (None: no limit of its own)."""
        ...

    @property
    def available(self) -> bool:
        """False while Redis is known to be unreachable (the breaker is open)."""
        ...

    def failed(self, exc: BaseException, *, quiet: bool = False) -> None:
        """Report a failure of Redis (the breaker opens: nobody waits on it then)."""
        ...

    async def close(self) -> None: ...


class AlwaysUp:
    """No breaker (QUEUE=redis: an update is not answered without Redis): always available,
    calls unbounded by a budget, a failure reported changes nothing. A user that asks
    `available` after reporting one finds Redis still "up", so it has no way around it and
    raises StorageUnavailable."""

    budget: float | None = None

    @property
    def available(self) -> bool:
        return True

    def failed(self, exc: BaseException, *, quiet: bool = False) -> None:
        return None

    async def close(self) -> None:
        return None


# Stateless: one serves every user without a breaker.
ALWAYS_UP = AlwaysUp()


class RedisHealth:
    """closed (use Redis) -> open (fail fast; a background probe) -> recovery -> closed."""

    def __init__(
        self,
        probe: Probe,
        *,
        cooldown: float = COOLDOWN,
        budget: float = CALL_BUDGET,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._probe = probe
        self.cooldown = cooldown
        self.budget: float = budget
        self.clock = clock
        self.closed = True
        self.opened_at = 0.0  # when the outage began
        self.outages = 0
        self.probes = 0  # made by the reviver (or a test), never by a call
        self._steps: list[Recovery] = []
        self._recovering = asyncio.Lock()
        self._reviver: asyncio.Task[None] | None = None

    @property
    def available(self) -> bool:
        return self.closed

    def on_recovery(self, step: Recovery) -> None:
        """Run `step` once Redis answers again, before it is used (a spool written back)."""
        self._steps.append(step)

    def failed(self, exc: BaseException, *, quiet: bool = False) -> None:
        """A call failed: open (one WARNING when this begins an outage, unless `quiet`) and
        keep a reviver probing."""
        if self.closed:
            self.closed, self.opened_at = False, self.clock()
            self.outages += 1
            if not quiet:
                log.warning(
                    "Redis is unavailable (%s): answering without memory until it is back",
                    reason(exc),
                )
        if self._reviver is None or self._reviver.done():
            self._reviver = asyncio.create_task(self._revive(), name="membot:redis-reviver")

    async def call(self, call: Callable[[], Awaitable[_T]]) -> _T:
        """One call to Redis within the budget. StorageUnavailable at once while open, and
        when the call fails (which opens the breaker)."""
        if not self.closed:
            raise StorageUnavailable("Redis is unavailable")
        try:
            async with asyncio.timeout(self.budget):
                return await call()
        except FAILURES as exc:
            self.failed(exc)
            if isinstance(exc, StorageUnavailable):
                raise
            raise StorageUnavailable(f"Redis failed ({reason(exc)})") from exc

    async def recover(self) -> bool:
        """Probe now; once Redis answers, run the recovery steps, then close. Whether it is
        closed. The reviver calls this every `cooldown` seconds."""
        async with self._recovering:
            if self.closed:
                return True
            self.probes += 1
            try:
                async with asyncio.timeout(self.budget):
                    await self._probe()
                written = 0
                for step in self._steps:
                    written += await step()
            except FAILURES as exc:
                self.failed(exc)  # still down: nothing more is logged
                return False
            self.closed = True
            log.info(
                "Redis is back after %.1f s: memory in use again, %d spooled change(s) written",
                self.clock() - self.opened_at,
                written,
            )
            return True

    async def _revive(self) -> None:
        while not self.closed:
            await asyncio.sleep(self.cooldown)  # the probe's period, not synchronisation
            await self.recover()

    async def close(self) -> None:
        task, self._reviver = self._reviver, None
        if task is not None:
            await stopped(task)
            await asyncio.gather(task, return_exceptions=True)
