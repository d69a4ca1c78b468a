"""A worker: reads the shards it holds, answers each chat's updates in order, acknowledges.

Entries are put in lanes (lanes.py), one per chat: a lane runs its updates one after another,
in update_id order; lanes run side by side, up to `concurrency` updates in hand. An entry is
acknowledged only once handled (its turn stored and its answer sent): by the handler through
`done`, still in the chat's turn, or else after the handler returned. When the
handler fails for a reason that passes (Redis or the storage is unreachable), the entry is
tried again, as a possible repeat, with backoff, and the chat's later updates wait behind it.
The handler asks `fence` before it answers, inside the chat's turn: a worker whose lease
lapsed and whose shard was taken over leaves that update, and the chat's later ones, to the
new holder.

Stopping: no new entries are read or started; the ones being handled finish (within
`grace`); everything else stays pending in Redis, and the shards are released so the next
holder takes those entries over at once, oldest first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from redis.exceptions import RedisError, ResponseError

from membot.errors import MembotError
from membot.memory.base import StorageUnavailable
from membot.queue.lanes import Lanes
from membot.queue.shards import ShardLeases, assign
from membot.queue.stream import HANDLED, Entry, UpdateStream

if TYPE_CHECKING:
    from collections.abc import Iterable

log = logging.getLogger(__name__)

Handler = Callable[[Entry], Awaitable[None]]

# Longest wait between two tries of an update that failed for a passing reason.
MAX_BACKOFF = 10.0
# How long one read waits for new entries (it is cancelled at once on stop).
BLOCK_MS = 1000


class NotHolder(MembotError):
    """Raised by the handler (through `StreamWorker.fence`): the update's shard has another
    holder now. The update is left pending for it, with the chat's later ones."""

    def __init__(self, shard: int, taken: int) -> None:
        super().__init__(shard)
        self.shard = shard
        self.taken = taken  # how many times this worker had taken the shard, when it was seen


def transient(exc: BaseException) -> bool:
    """Failures that pass: the update is tried again, not given up."""
    return isinstance(exc, (RedisError, StorageUnavailable, ConnectionError))


class StreamWorker:
    def __init__(
        self,
        stream: UpdateStream,
        leases: ShardLeases,
        handler: Handler,
        *,
        concurrency: int,
        claim_idle: float,
    ) -> None:
        self.stream = stream
        self.leases = leases
        self.handler = handler
        self.concurrency = concurrency
        self.interval = claim_idle / 3
        self.consumer = leases.consumer
        self.owned: set[int] = set()  # held and read
        self._draining: set[int] = set()  # held until their updates in hand are done
        self._reading: frozenset[int] = frozenset()  # in the read now waiting on Redis
        self._turn = 0
        self._read_token = uuid.uuid4().hex  # see stream.py, _READ_HELD
        self._sweep = False  # the next read also returns this worker's pending entries
        self._taken: Counter[int] = Counter()  # times each shard was taken by this worker
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._lanes = Lanes(self._handle, stopping=self._stop, freed=self._wake)
        self._down = False  # Redis is unreachable: warned once
        self._balanced = asyncio.Condition()  # notified after each look at the shards
        self.handled = 0

    # -- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        await self.stream.prepare()
        await self._rebalance()
        self._tasks = [
            asyncio.create_task(self._balance_loop(), name="queue-balance"),
            asyncio.create_task(self._read_loop(), name="queue-read"),
        ]
        log.info("queue: worker %s started", self.consumer)

    async def stop(self, grace: float) -> None:
        """Finish what is being handled (up to `grace` seconds), leave the rest pending."""
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(RedisError):
            await self.leases.leave()  # the others rebalance without waiting for our lease
        lanes = list(self._lanes.tasks.values())
        if lanes:
            _, late = await asyncio.wait(lanes, timeout=grace)
            if late:
                log.warning("queue: %d update(s) cut short by shutdown, left pending", len(late))
                for task in late:
                    task.cancel()
                await asyncio.gather(*late, return_exceptions=True)
        for shard in sorted(self.owned | self._draining):
            with contextlib.suppress(RedisError):
                await self.leases.release(shard)
        self.owned.clear()
        self._draining.clear()
        log.info("queue: worker %s stopped", self.consumer)

    # -- shards ------------------------------------------------------------------------------

    async def _balance_loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval)
            if self._stop.is_set():
                return
            try:
                await self._rebalance()
                self._up()
            except RedisError as exc:
                self._outage(exc)

    async def _rebalance(self) -> None:
        live = await self.leases.live_workers()
        mine = {s for s, w in assign(self.stream.shards, live).items() if w == self.consumer}
        for shard in sorted(self.owned):
            if shard not in mine:
                self.owned.discard(shard)
                self._draining.add(shard)
            elif not await self.leases.hold(shard):
                log.warning("queue: lost shard %d to another worker", shard)
                self._give_up(shard)
        for shard in sorted(self._draining):
            if shard in mine:
                self._draining.discard(shard)
                self.owned.add(shard)
            elif self._lanes.in_hand[shard] == 0 and shard not in self._reading:
                await self.leases.release(shard)
                self._draining.discard(shard)
            else:
                await self.leases.hold(shard)  # kept until its updates are done
        for shard in sorted(mine - self.owned - self._draining):
            if await self.leases.hold(shard):
                await self.stream.ensure_group(shard)
                orphans = await self.stream.claim(self.consumer, shard)
                if orphans:
                    log.info("queue: shard %d: took over %d update(s)", shard, len(orphans))
                self.owned.add(shard)
                self._taken[shard] += 1
                for entry in orphans:
                    self._lanes.add(entry)
                await self.stream.forget_consumers(shard, keep=set(live))
        self._sweep = True  # once per rebalance (every CLAIM_IDLE/3)
        self._wake.set()
        async with self._balanced:
            self._balanced.notify_all()

    async def wait_for_shards(self) -> None:
        """Until this worker holds at least one shard (another may hold them all for now)."""
        async with self._balanced:
            await self._balanced.wait_for(lambda: bool(self.owned))

    # -- reading -----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        while not self._stop.is_set():
            free = self.concurrency - len(self._lanes)
            shards = sorted(self.owned)
            if free <= 0 or not shards:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), 1.0)
                continue
            # A different shard first each time: none waits behind the others' backlog.
            self._turn = (self._turn + 1) % len(shards)
            held = [
                (s, self.leases.lease_key(s)) for s in shards[self._turn :] + shards[: self._turn]
            ]
            try:
                # Only the fenced read itself keeps a draining shard's lease: the wait after
                # it reads nothing into the group, and it is where an idle worker spends its
                # time, so covering it too held a shard to hand over for one more rebalance
                # (a new worker got its shards after ~27 s instead of ~17 s in `bench queue`).
                self._reading = frozenset(shards)
                try:
                    sweep = self._sweep
                    entries, last = await self.stream.read_held(
                        self.consumer, held, free, self._read_token, sweep=sweep
                    )
                finally:
                    self._reading = frozenset()
                # Kept after a failed read: if it did take entries, the next read returns them.
                self._read_token = uuid.uuid4().hex
                if sweep:
                    self._sweep = False
                self._up()
                if not entries:
                    await self.stream.wait(last, BLOCK_MS)
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                log.warning("queue: the consumer groups are gone (Redis lost its data?): remade")
                for shard in shards:
                    await self.stream.ensure_group(shard)
                continue
            except RedisError as exc:
                self._outage(exc)
                await self._pause(1.0)
                continue
            for entry in entries:
                if entry.shard in self.owned or entry.shard in self._draining:
                    self._lanes.add(entry)

    # -- updates ----------------------------------------------------------------------------

    async def _handle(self, entry: Entry) -> None:
        done = False
        attempt = 0
        while True:
            try:
                if not done:
                    await self.handler(entry)  # it asks `fence` whether it was handled
                    done = True
                if entry.ref not in self._lanes.acked:  # else the handler did, in its turn
                    await self.stream.ack(entry)
                self.handled += 1
                self._up()
                return
            except NotHolder as lost:
                if lost.taken != self._taken[entry.shard]:
                    # Seen before this worker took the shard back: its turn again, at once.
                    entry = replace(entry, redelivered=True)
                    continue
                if entry.shard in self.owned | self._draining:  # said once per shard
                    log.warning(
                        "queue: shard %d has another holder now; its updates are left to it",
                        entry.shard,
                    )
                self._give_up(entry.shard)
                return
            except Exception as exc:
                if not transient(exc):
                    log.error(
                        "queue: update %s failed for good (%s); acknowledged",
                        entry.update_id,
                        type(exc).__name__,
                    )
                    done = True
                    if isinstance(exc, ResponseError):
                        return
                    continue
                self._outage(exc)
            if self._stop.is_set() or entry.shard not in self.owned | self._draining:
                return  # left pending: the shard's next holder takes it over
            # Tried again as a possible repeat: the failed try may have stored its turn.
            entry = replace(entry, redelivered=True)
            attempt += 1
            await self._pause(min(0.25 * 2**attempt, MAX_BACKOFF))

    async def fence(self, entry: Entry) -> bool:
        """For the handler, once it holds the chat's turn and before it answers: True when
        the update was handled already; NotHolder when another worker holds its shard now.

        The fenced read keeps a worker that lost a shard from taking more of it, but not from
        going on with what it took: a lease that lapsed (Redis down or this process stalled
        for most of CLAIM_IDLE) lets another worker claim the same updates, and two workers
        answering one chat's updates side by side answer them out of order. Checked inside
        the turn, the lease tells which of the two goes on: the one holding it now. A lease
        that lapsed with nobody taking it is still this worker's (only a holder claims)."""
        taken = self._taken[entry.shard]
        owner, mark = await self.stream.fence(entry, self.leases.lease_key(entry.shard))
        if owner is not None and owner != self.consumer:
            raise NotHolder(entry.shard, taken)
        return mark == HANDLED

    async def done(self, entry: Entry) -> None:
        """For the handler, still inside the chat's turn, once the update is handled: it is
        acknowledged (marked done) before the turn is let go, so a worker that took the shard
        over and waits for the turn with the same update finds it done, whatever its kind."""
        await self.stream.ack(entry)
        self._lanes.acked.add(entry.ref)

    def _give_up(self, shard: int) -> None:
        """Another worker holds the shard: its updates not started yet are that worker's."""
        self.owned.discard(shard)
        self._draining.discard(shard)
        self._lanes.drop_queued(shard)

    # -- outages -----------------------------------------------------------------------------

    def _outage(self, exc: BaseException) -> None:
        if not self._down:
            self._down = True
            log.warning("queue: Redis is unreachable (%s); retrying", type(exc).__name__)

    def _up(self) -> None:
        if self._down:
            self._down = False
            log.warning("queue: Redis is back")

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    def holding(self) -> Iterable[int]:
        return sorted(self.owned)
