"""A conversation's turn across processes: a Redis lock with an owner token, a timeout, and
extension while the turn runs (STORAGE=redis).

Inside one process `ConversationService` already orders a conversation's turns with an
asyncio lock (first come, first served). With several processes on one Redis, that is not
enough: two of them could answer the same conversation at once and interleave two turns.
So, once a process holds its local lock, it also takes `{REDIS_PREFIX}lock:<conversation>`:
redis-py's `Lock` (SET NX PX with a random token; only the owner can release or extend it).
The lock expires after `timeout` seconds, so a process killed in mid-turn blocks nobody for
longer than that; a turn that runs longer keeps it by re-arming the timeout every third of
it. Waiting for a lock held elsewhere is polling (`poll` seconds), not FIFO across
processes: each process keeps its own order, and Telegram's per-chat order is kept by
having one process take one chat's updates at a time (the stream's shards route them,
intake/shards.py).

With the breaker (QUEUE=local, health.py) the lock degrades with the storage; with the null
health object (QUEUE=redis) Redis failing raises StorageUnavailable: the update is tried
again, an HTTP request answered 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator

from redis.asyncio import Redis
from redis.asyncio.lock import Lock
from redis.exceptions import LockError, RedisError

from membot.errors import ConversationBusy
from membot.ids import ConversationId
from membot.redis.errors import FAILURES, unavailable
from membot.redis.health import ALWAYS_UP, Health

log = logging.getLogger(__name__)


class RedisTurnLocks:
    """core.turnlock.TurnLocks across processes. With the breaker as `health` (memory's
    outage, health.py) the lock degrades with the storage: while Redis is known to be down
    only the local lock is held, and a Redis failure while taking or releasing it reports the
    outage and lets the turn go on (each Redis call then gets the breaker's budget). With
    `AlwaysUp` a Redis failure raises StorageUnavailable."""

    def __init__(
        self,
        client: Redis,
        prefix: str,
        *,
        timeout: float = 30.0,
        poll: float = 0.05,
        health: Health = ALWAYS_UP,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.timeout = timeout
        self.poll = poll
        self.health = health
        # Locks whose release Redis did not take (it was down): name -> (lock, token).
        self._orphans: dict[str, tuple[Lock, str]] = {}

    def key(self, cid: ConversationId) -> str:
        return f"{self.prefix}lock:{cid}"

    @contextlib.asynccontextmanager
    async def hold(self, cid: ConversationId, *, wait: bool = True) -> AsyncIterator[None]:
        if not self.health.available:
            yield  # Redis is down: this process's own lock is all there is
            return
        # thread_local=False: every coroutine of this process runs in one thread, and each
        # must keep its own token.
        lock = Lock(
            self.client,
            self.key(cid),
            timeout=self.timeout,
            sleep=self.poll,
            thread_local=False,
            raise_on_release_error=False,
        )
        token = uuid.uuid4().hex
        if not await self._acquire(lock, cid, token, wait=wait):
            if self.health.available:
                raise ConversationBusy(f"{cid} is held by another process")
            yield  # Redis failed while taking it: go on with the local lock only
            return
        ended = asyncio.Event()
        keeper = asyncio.create_task(self._keep(lock, cid, ended), name=f"membot:turnlock:{cid}")
        try:
            yield
        finally:
            ended.set()
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
            await self._release(lock, token, cid)

    async def _acquire(self, lock: Lock, cid: ConversationId, token: str, *, wait: bool) -> bool:
        """Whether it was taken; False with the breaker open too (this failure opened it).
        StorageUnavailable when Redis failed and there is no breaker to go on without it."""
        try:
            await self._release_orphan(self.key(cid))
            return await self._poll(lock, token, wait=wait, budget=self.health.budget)
        except FAILURES as exc:
            self._orphans[self.key(cid)] = (lock, token)  # the SET may have reached Redis
            self._failed(exc)
            return False

    def _failed(self, exc: BaseException) -> None:
        """Report a failure; raised (as StorageUnavailable) unless the health object takes
        over, as the breaker does by opening (the turn goes on with the local lock)."""
        self.health.failed(exc)
        if self.health.available:
            with unavailable("turn lock"):
                raise exc

    async def _poll(self, lock: Lock, token: str, *, wait: bool, budget: float | None) -> bool:
        """Try to take the lock every `poll` seconds (polled here rather than by redis-py, so
        that each try has the budget and sees its own token)."""
        while True:
            async with asyncio.timeout(budget):
                if await self._take(lock, token):
                    return True
            if not wait:
                return False
            await asyncio.sleep(self.poll)  # the lock's poll period, not synchronisation

    async def _take(self, lock: Lock, token: str) -> bool:
        if await lock.acquire(blocking=False, token=token):
            return True
        # A SET that reached Redis but whose reply was lost, sent again by the client, finds
        # the lock held by this very token: without this the turn would wait for its own lock
        # to expire. It is let go and taken again, so redis-py's Lock knows it holds it.
        held = await self.client.get(lock.name)
        if (held.decode() if isinstance(held, bytes) else held) != token:
            return False
        await self._release_token(lock, token)
        return bool(await lock.acquire(blocking=False, token=token))

    async def _release(self, lock: Lock, token: str, cid: ConversationId) -> None:
        try:
            async with asyncio.timeout(self.health.budget):
                await lock.release()
        except LockError:
            # It expired (the turn outlived extensions that failed): someone else may
            # hold it now, and theirs is not ours to release.
            log.warning("%s: the turn lock had expired before the turn ended", cid)
        except FAILURES as exc:
            # Released when the conversation's next turn comes (in this process), not left
            # to block it until it expires.
            self._orphans[self.key(cid)] = (lock, token)
            self._failed(exc)

    async def _release_orphan(self, name: str) -> None:
        """Release a lock of this process that Redis went down with (it may hold it still)."""
        orphan = self._orphans.get(name)
        if orphan is None:
            return
        lock, token = orphan
        async with asyncio.timeout(self.health.budget):
            await self._release_token(lock, token)
        del self._orphans[name]

    @staticmethod
    async def _release_token(lock: Lock, token: str) -> None:
        with contextlib.suppress(LockError):  # expired, or never reached Redis
            await lock.do_release(token.encode())

    async def _keep(self, lock: Lock, cid: ConversationId, ended: asyncio.Event) -> None:
        """Re-arm the lock's timeout until the turn has `ended`. Its cancellation alone
        does not stop it: on Python 3.11 a cancellation that comes as one of redis-py's
        writes finishes is lost (`asyncio.wait_for`, around the write, returns its result
        instead), and a keeper that went on would hold the conversation for ever."""
        while not ended.is_set():
            await asyncio.sleep(self.timeout / 3)  # the lease's period, not synchronisation
            if ended.is_set() or not self.health.available:
                continue  # the turn is over; or the outage is already reported
            try:
                await lock.reacquire()
            except (LockError, RedisError) as exc:
                log.warning("%s: could not extend the turn lock: %s", cid, type(exc).__name__)
