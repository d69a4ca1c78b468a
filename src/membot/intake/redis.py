"""The Redis stream as an intake (QUEUE=redis): shards held under leases, fenced reads.

`put` adds updates to the stream (stream.py; a repeat is recognised by its mark). A process
that also takes (`membot run`, `membot worker`) holds a share of the shards (shards.py) and
reads only from those, in one step with the lease check (a fenced read). `fence`, asked by
the runner inside the chat's turn, tells a process whose lease lapsed and whose shard was
taken over to leave that update, and the chat's later ones, to the new holder; `done`
acknowledges a handled update (marked done, acknowledged, deleted) still inside the turn.

Stopping: no new entries are read; what the runner holds finishes (its grace), everything
else stays pending in Redis, and the shards are released so the next holder takes those
entries over at once, oldest first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from redis.exceptions import RedisError, ResponseError

from membot.intake.contract import Entry, IntakeUnavailable, NotHolder, is_control
from membot.intake.controls import RedisControls
from membot.intake.shards import ShardLeases, assign
from membot.intake.stream import HANDLED, UpdateStream
from membot.redis.errors import unavailable

log = logging.getLogger(__name__)

# How long one read waits for new entries (it is cancelled at once on stop).
BLOCK_MS = 1000


def consumer_name() -> str:
    """Unique per process, readable in XINFO: host, pid, and a nonce (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class StreamIntake:
    leaves_pending = True  # what has not started stays in Redis for the next holder
    retries = True  # a failure that passes leaves the update where it was: tried again

    def __init__(
        self, stream: UpdateStream, leases: ShardLeases | None, *, claim_idle: float
    ) -> None:
        """`leases`: this process takes updates (a worker); None: it only puts them."""
        self.stream = stream
        self.leases = leases
        self.interval = claim_idle / 3
        self.consumer = leases.consumer if leases is not None else ""
        self.owned: set[int] = set()  # held and read
        self.controls = RedisControls(stream.client, stream.prefix)  # pub/sub, not the stream
        self._draining: set[int] = set()  # held until their updates in hand are done
        self._reading: frozenset[int] = frozenset()  # in the read now waiting on Redis
        self._in_hand: Counter[int] = Counter()  # per shard, taken and not let go
        self._claimed: list[Entry] = []  # a dead holder's updates, taken over
        self._turn = 0
        self._read_token = uuid.uuid4().hex  # see stream.py, _READ_HELD
        self._sweep = False  # the next read also returns this worker's pending entries
        self._taken: Counter[int] = Counter()  # times each shard was taken by this worker
        self._balancer: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._down = False  # Redis is unreachable: warned once
        self._balanced = asyncio.Condition()  # notified after each look at the shards

    # -- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        with unavailable("stream"):
            await self.stream.prepare()
            if self.leases is None:
                return
            await self.controls.listen()
            await self._rebalance()
        self._balancer = asyncio.create_task(self._balance_loop(), name="stream-balance")
        log.info("stream: worker %s started", self.consumer)

    async def stop(self) -> None:
        """Take nothing more; the others rebalance without waiting for this one's lease."""
        self._stop.set()
        if self._balancer is not None:
            self._balancer.cancel()
            await asyncio.gather(self._balancer, return_exceptions=True)
        if self.leases is not None:
            with contextlib.suppress(RedisError):
                await self.leases.leave()

    async def close(self) -> None:
        """Once the runner is done: the shards are released."""
        await self.controls.close()
        if self.leases is None:
            return
        for shard in sorted(self.owned | self._draining):
            with contextlib.suppress(RedisError):
                await self.leases.release(shard)
        self.owned.clear()
        self._draining.clear()
        log.info("stream: worker %s stopped", self.consumer)

    # -- putting -----------------------------------------------------------------------------

    async def put(self, batch: Sequence[Mapping[str, Any]]) -> None:
        """Each update into its shard's stream, one after another (what was added before a
        failure is recognised by its mark when the batch comes again)."""
        try:
            for update in batch:
                if is_control(update):  # to every worker now (controls.py says why)
                    await self.controls.publish(update)
                else:
                    await self.stream.publish(update)
        except RedisError as exc:
            raise IntakeUnavailable(f"Redis: {type(exc).__name__}") from None

    # -- shards ------------------------------------------------------------------------------

    async def _balance_loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval)
            if self._stop.is_set():
                return
            try:
                await self._rebalance()
                self.up()
            except RedisError as exc:
                self.outage(exc)

    async def _rebalance(self) -> None:
        assert self.leases is not None
        live = await self.leases.live_workers()
        mine = {s for s, w in assign(self.stream.shards, live).items() if w == self.consumer}
        for shard in sorted(self.owned):
            if shard not in mine:
                self.owned.discard(shard)
                self._draining.add(shard)
            elif not await self.leases.hold(shard):
                log.warning("stream: lost shard %d to another worker", shard)
                self._give_up(shard)
        for shard in sorted(self._draining):
            if shard in mine:
                self._draining.discard(shard)
                self.owned.add(shard)
            elif self._in_hand[shard] == 0 and shard not in self._reading:
                await self.leases.release(shard)
                self._draining.discard(shard)
            else:
                await self.leases.hold(shard)  # kept until its updates are done
        for shard in sorted(mine - self.owned - self._draining):
            if await self.leases.hold(shard):
                await self.stream.ensure_group(shard)
                orphans = await self.stream.claim(self.consumer, shard)
                if orphans:
                    log.info("stream: shard %d: took over %d update(s)", shard, len(orphans))
                self.owned.add(shard)
                self._taken[shard] += 1
                self._claimed.extend(orphans)
                await self.stream.forget_consumers(shard, keep=set(live))
        self._sweep = True  # once per rebalance (every CLAIM_IDLE/3)
        self._wake.set()
        async with self._balanced:
            self._balanced.notify_all()

    async def wait_for_shards(self) -> None:
        """Until this worker holds at least one shard (another may hold them all for now)."""
        async with self._balanced:
            await self._balanced.wait_for(lambda: bool(self.owned))

    def holding(self) -> list[int]:
        return sorted(self.owned)

    def _give_up(self, shard: int) -> None:
        """Another worker holds the shard: its updates not started yet are that worker's."""
        self.owned.discard(shard)
        self._draining.discard(shard)

    # -- taking ------------------------------------------------------------------------------

    async def take(self, room: int) -> list[Entry]:
        """What the last look at the shards took over, else one fenced read of the shards
        held (a different one first each time: none waits behind the others' backlog); when
        it finds nothing, a wait of up to BLOCK_MS for more."""
        if self._claimed:
            claimed, self._claimed = self._claimed, []
            return self._hold(claimed)
        shards = sorted(self.owned)
        if not shards:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 1.0)
            return []
        self._turn = (self._turn + 1) % len(shards)
        assert self.leases is not None
        held = [(s, self.leases.lease_key(s)) for s in shards[self._turn :] + shards[: self._turn]]
        try:
            # Only the fenced read itself keeps a draining shard's lease: the wait after
            # it reads nothing into the group, and it is where an idle worker spends its
            # time, so covering it too held a shard to hand over for one more rebalance
            # (a new worker got its shards after ~27 s instead of ~17 s in `bench queue`).
            self._reading = frozenset(shards)
            try:
                sweep = self._sweep
                entries, last = await self.stream.read_held(
                    self.consumer, held, room, self._read_token, sweep=sweep
                )
            finally:
                self._reading = frozenset()
            # Kept after a failed read: if it did take entries, the next read returns them.
            self._read_token = uuid.uuid4().hex
            if sweep:
                self._sweep = False
            self.up()
            if not entries:
                await self.stream.wait(last, BLOCK_MS)
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            log.warning("stream: the consumer groups are gone (Redis lost its data?): remade")
            for shard in shards:
                await self.stream.ensure_group(shard)
            return []
        except RedisError as exc:
            self.outage(exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), 1.0)
            return []
        return self._hold(e for e in entries if e.shard in self.owned | self._draining)

    def _hold(self, entries: Iterable[Entry]) -> list[Entry]:
        held = list(entries)
        for entry in held:
            self._in_hand[entry.shard] += 1
        return held

    async def control(self) -> list[Entry]:
        return await self.controls.next()

    def let_go(self, entry: Entry) -> None:
        self._in_hand[entry.shard] -= 1

    def keeps(self, entry: Entry) -> bool:
        return entry.shard in self.owned | self._draining

    def rest(self) -> list[Entry]:
        return []  # pending in Redis: the shards' next holders take them

    # -- answering ---------------------------------------------------------------------------

    async def fence(self, entry: Entry) -> bool:
        """For the runner, once it holds the chat's turn and before it answers: True when
        the update was handled already; NotHolder when another worker holds its shard now.

        The fenced read keeps a worker that lost a shard from taking more of it, but not from
        going on with what it took: a lease that lapsed (Redis down or this process stalled
        for most of CLAIM_IDLE) lets another worker claim the same updates, and two workers
        answering one chat's updates side by side answer them out of order. Checked inside
        the turn, the lease tells which of the two goes on: the one holding it now. A lease
        that lapsed with nobody taking it is still this worker's (only a holder claims)."""
        assert self.leases is not None
        taken = self._taken[entry.shard]
        owner, mark = await self.stream.fence(entry, self.leases.lease_key(entry.shard))
        if owner is not None and owner != self.consumer:
            # Seen before this worker took the shard back: its turn again, at once.
            again = taken != self._taken[entry.shard]
            if not again:
                if entry.shard in self.owned | self._draining:  # said once per shard
                    log.warning(
                        "stream: shard %d has another holder now; its updates are left to it",
                        entry.shard,
                    )
                self._give_up(entry.shard)
            raise NotHolder(entry.shard, again=again)
        return mark == HANDLED

    async def done(self, entry: Entry) -> None:
        """Still inside the chat's turn, once the update is handled: it is acknowledged
        (marked done) before the turn is let go, so a worker that took the shard over and
        waits for the turn with the same update finds it done, whatever its kind."""
        await self.stream.ack(entry)

    # -- outages -----------------------------------------------------------------------------

    def outage(self, exc: BaseException) -> None:
        if not self._down:
            self._down = True
            log.warning("stream: Redis is unreachable (%s); retrying", type(exc).__name__)

    def up(self) -> None:
        if self._down:
            self._down = False
            log.warning("stream: Redis is back")
