"""The clock as a source: a task whose time has come enters the intake as an update.

Like polling.py and webhook.py, this only puts: the firing (schedule/models.py `Firing`) is
one more update of its chat, journaled with QUEUE=local, on the chat's shard of the stream
with QUEUE=redis, so it is ordered with the chat's messages and survives what they survive.
Its turn (core/timed.py) runs it at most once: it checks, inside the chat's turn, that the
task is still due at that time and that the archive holds no turn of that firing, and moves
the task on with its answer.

Once put, a task is held (`TaskStore.hold`) for `refire` seconds: it is put again only if it
is still due then, which happens when the update was lost before it was kept or its turn
failed without moving it. The same firing put twice is the same update (its id is derived
from it): the stream keeps it once, and a second turn of it finds it done.

With Redis every process may run this, but only the holder of a lease fires (as only one
receiver polls): a process that stops or stalls hands the clock to another within the lease.
While nothing is due it sleeps until the next time it knows of, looking at most every `poll`
seconds for tasks another process set. A failure that passes (Redis down, the disk refusing)
delays tasks, never doubles or loses them: they are still due when it is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta

from membot.clock import Clock, utc_now
from membot.errors import Unavailable
from membot.intake.contract import Intake
from membot.intake.polling import Lease
from membot.schedule.store import TaskStore
from membot.tasks import stopped

log = logging.getLogger(__name__)

# Seconds a firing is left to its turn before it is put again (it is then still due).
REFIRE = 300.0
# Longest wait after a failure that passes.
MAX_BACKOFF = 5.0


class DueSource:
    def __init__(
        self,
        store: TaskStore,
        intake: Intake,
        *,
        clock: Clock = utc_now,
        lease: Lease | None = None,
        poll: float = 1.0,
        refire: float = REFIRE,
        batch: int = 1000,
    ) -> None:
        self.store = store
        self.intake = intake
        self.clock = clock
        self.lease = lease
        self.poll = poll
        self.refire = timedelta(seconds=refire)
        self.batch = batch
        self.fired = 0
        self._task: asyncio.Task[None] | None = None
        self._down = False
        self._holding = lease is None

    async def start(self) -> None:
        """Start firing. The store's index is built in the background (the file backend
        reads every chat's tasks.json): start-up does not wait for it."""
        self._task = asyncio.create_task(self._run(), name="due-tasks")

    async def stop(self) -> None:
        if self._task is not None:
            await stopped(self._task)
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.lease is not None:
            with contextlib.suppress(Unavailable):
                await self.lease.release()

    async def tick(self, now: datetime) -> int:
        """Put every task due at `now` (up to a batch); how many."""
        due = await self.store.due(now, self.batch)
        if not due:
            return 0
        await self.intake.put([task.firing.update() for task in due])
        await self.store.hold_all(due, now + self.refire)
        self.fired += len(due)
        log.info("tasks: %d due task(s) put in their chats' queues", len(due))
        return len(due)

    async def _run(self) -> None:
        started = False
        backoff = 0.0
        while True:
            try:
                if not started:
                    await self.store.start()
                    started = True
                if self.lease is not None and not await self.lease.hold():
                    self._lead(False)
                    await asyncio.sleep(self.poll)
                    continue
                self._lead(True)
                fired = await self.tick(self.clock())
                self._up()
                backoff = 0.0
                if fired >= self.batch:
                    continue  # more may be due right now
                await asyncio.sleep(await self._wait())
            except Unavailable as exc:
                self._outage(exc)
                backoff = min(max(backoff * 2, 0.25), MAX_BACKOFF)
                await asyncio.sleep(backoff)
            except Exception as exc:  # keep the clock going: a task must not stop the others
                log.error("tasks: firing failed (%s); trying again", type(exc).__name__)
                backoff = min(max(backoff * 2, 1.0), MAX_BACKOFF)
                await asyncio.sleep(backoff)

    async def _wait(self) -> float:
        """Seconds until the next task this process knows of, `poll` at most (another process
        may set one sooner; the lease must be renewed in time)."""
        following = await self.store.next_time()
        if following is None:
            return self.poll
        return min(max((following - self.clock()).total_seconds(), 0.0), self.poll)

    def _lead(self, holding: bool) -> None:
        if holding != self._holding:
            self._holding = holding
            log.info("tasks: %s", "firing due tasks" if holding else "standing by (another fires)")

    def _outage(self, exc: BaseException) -> None:
        if not self._down:
            self._down = True
            log.warning("tasks: due tasks cannot be read or put now (%s); they wait", exc)

    def _up(self) -> None:
        if self._down:
            self._down = False
            log.warning("tasks: due tasks are put again")
