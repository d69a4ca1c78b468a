"""The stop a process is told of (roles/signals.py): signals arriving together are one stop,
a later one hurries it; real signals reach it while its handlers are installed."""

from __future__ import annotations

import asyncio
import os
import signal

from membot.roles.signals import Stopping, on_signals


def test_duplicates_of_one_ctrl_c_are_one_stop() -> None:
    stopping = Stopping(duplicates=60.0)
    stopping.signalled(signal.SIGINT)  # the terminal's
    stopping.signalled(signal.SIGINT)  # a wrapper's forwarded copy of the same Ctrl-C
    assert stopping.requested.is_set()
    assert not stopping.hurried.is_set()


def test_a_later_signal_hurries_the_stop() -> None:
    stopping = Stopping(duplicates=0.0)
    stopping.stop()  # asked in code first: the first signal still only stops
    stopping.signalled(signal.SIGTERM)
    assert not stopping.hurried.is_set()
    stopping.signalled(signal.SIGINT)
    assert stopping.hurried.is_set()


async def test_signals_reach_it_while_installed_and_never_end_the_process() -> None:
    stopping = Stopping(duplicates=0.0)
    with on_signals(stopping):
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.wait_for(stopping.requested.wait(), 5)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stopping.hurried.wait(), 5)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
