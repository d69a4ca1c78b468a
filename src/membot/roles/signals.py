"""SIGINT and SIGTERM stop a process role gracefully (a second Ctrl-C ends it at once)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def on_signals(stop: Callable[[], object]) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM call `stop` instead of ending the process."""
    loop = asyncio.get_running_loop()
    for sig in SIGNALS:
        loop.add_signal_handler(sig, stop)
    try:
        yield
    finally:
        for sig in SIGNALS:
            loop.remove_signal_handler(sig)


async def until_signalled() -> None:
    stop = asyncio.Event()
    with on_signals(stop.set):
        await stop.wait()
