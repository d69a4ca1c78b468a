"""The circuit breaker of the Redis wrapper (memory/resilient.py): after a failure, nothing
waits on a dead server; a probe every `cooldown` seconds finds it back."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("membot.memory.resilient")

COOLDOWN = 1.0  # seconds between two probes of a server that failed

Monotonic = Callable[[], float]


class CircuitBreaker:
    """closed (use the server) -> open (fail fast) -> after `cooldown`, due for one probe."""

    def __init__(self, *, cooldown: float = COOLDOWN, clock: Monotonic = time.monotonic) -> None:
        self.cooldown = cooldown
        self.clock = clock
        self.closed = True
        self.opened_at = 0.0  # when the outage began
        self.probed_at = 0.0  # when the server last failed (or was last probed)
        self.outages = 0

    def open(self, reason: str, *, quiet: bool = False) -> bool:
        """Record a failure; True when it begins an outage (logged once, unless `quiet`)."""
        now = self.clock()
        self.probed_at = now
        if not self.closed:
            return False
        self.closed, self.opened_at = False, now
        self.outages += 1
        if not quiet:
            log.warning(
                "Redis is unavailable (%s): answering without memory until it is back",
                reason,
            )
        return True

    def due(self) -> bool:
        """Open, and time for a probe."""
        return not self.closed and self.clock() - self.probed_at >= self.cooldown

    def close(self, written: int) -> None:
        if self.closed:
            return
        self.closed = True
        log.info(
            "Redis is back after %.1f s: memory in use again, %d spooled change(s) written",
            self.clock() - self.opened_at,
            written,
        )
