"""Background work the process owns (membot/tasks.py): stopped for sure."""

from __future__ import annotations

import asyncio

from membot.tasks import stopped


async def test_a_loop_whose_cancellation_is_lost_is_stopped_all_the_same() -> None:
    # The loop is cancelled the moment the work inside its asyncio.wait_for has finished and
    # before the loop has resumed: Python 3.11 loses that cancellation (the wait returns
    # the work's result), as it did in redis-py's writes, and the loop runs on.
    written = asyncio.Event()
    rounds = 0

    async def write() -> None:
        written.set()

    async def loop() -> None:
        nonlocal rounds
        while True:
            rounds += 1
            await asyncio.wait_for(write(), 1.0)
            await asyncio.sleep(0.01)  # the loop's own period

    task = asyncio.create_task(loop())
    await written.wait()
    async with asyncio.timeout(5):
        await stopped(task)
    assert task.cancelled()
    assert rounds >= 1


async def test_a_task_that_ends_by_itself_is_left_as_it_ended() -> None:
    async def fails() -> None:
        raise ValueError("its own failure")

    task = asyncio.create_task(fails())
    await asyncio.sleep(0)  # it has run and failed
    await stopped(task)
    assert isinstance(task.exception(), ValueError)
