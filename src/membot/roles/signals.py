"""SIGINT and SIGTERM stop a process role: the first gracefully, a later one in a hurry.

The handlers stay installed for the whole stop, so no signal ever ends the process in the
middle of it (a KeyboardInterrupt, or asyncio.run cancelling every task): what a hurried stop
cuts short is left to be answered after the restart, never dropped.

Signals that arrive within DUPLICATES seconds of the first are that same stop: one Ctrl-C
reaches a process twice when a wrapper in the terminal's process group forwards it too
(`uv run` does, 0.2 s later). A signal after that hurries the stop: the answers in progress
are cut short at once instead of being waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Iterator

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Seconds after the first signal in which another is a duplicate of it, not a second press.
DUPLICATES = 1.0


class Stopping:
    """What the process has been told: `requested` (stop, letting work in progress finish)
    and `hurried` (stop now, leaving that work to the restart)."""

    def __init__(self, duplicates: float = DUPLICATES) -> None:
        self.requested = asyncio.Event()
        self.hurried = asyncio.Event()
        self.duplicates = duplicates
        self._first: float | None = None

    def stop(self) -> None:
        self.requested.set()

    def signalled(self, signum: int) -> None:
        name = signal.Signals(signum).name
        now = time.monotonic()
        if self._first is None:
            self._first = now
            if not self.requested.is_set():
                log.info(
                    "%s: stopping; answers in progress finish first (a second Ctrl-C or "
                    "SIGTERM stops at once, leaving them to be answered after the restart)",
                    name,
                )
            self.requested.set()
        elif now - self._first < self.duplicates:
            log.debug("%s: the same stop", name)
        elif not self.hurried.is_set():
            log.warning("%s again: stopping at once", name)
            self.hurried.set()
        self.requested.set()


@contextlib.contextmanager
def on_signals(stopping: Stopping) -> Iterator[Stopping]:
    """While inside, SIGINT and SIGTERM tell `stopping` instead of ending the process."""
    loop = asyncio.get_running_loop()
    for sig in SIGNALS:
        loop.add_signal_handler(sig, stopping.signalled, sig)
    try:
        yield stopping
    finally:
        for sig in SIGNALS:
            loop.remove_signal_handler(sig)
