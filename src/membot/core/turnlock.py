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
having one process take one chat's updates at a time (the scale-out issue routes them).

Without a health object (QUEUE=redis) Redis not answering raises StorageUnavailable: the
update is tried again, an HTTP request answered 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from membot.errors import Busy
from membot.ids import ConversationId
from membot.memory.base import StorageHealth

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.lock import Lock

log = logging.getLogger(__name__)


class ConversationBusy(Busy):
    """Another turn of the conversation is in progress, in this process or another, and the
    caller would not wait (core/service.py `exclusive`). Front doors answer it as busy."""


class TurnLocks(Protocol):
    def hold(
        self, cid: ConversationId, *, wait: bool = True
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold the conversation's turn; ConversationBusy at once if `wait` is False and it
        is held."""
        ...


class RedisTurnLocks:
    """`health`, when given (Redis's breaker, memory/health.py), makes the lock
    degrade with the storage: while Redis is known to be down only the local lock is held,
    and a Redis failure while taking or releasing it reports the outage and lets the turn go
    on (each Redis call then gets `budget` seconds). Without it a Redis error propagates."""

    def __init__(
        self,
        client: Redis,
        prefix: str,
        *,
        timeout: float = 30.0,
        poll: float = 0.05,
        health: StorageHealth | None = None,
        budget: float = 0.5,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.timeout = timeout
        self.poll = poll
        self.health = health
        self.budget = budget
        # Locks whose release Redis did not take (it was down): name -> (lock, token).
        self._orphans: dict[str, tuple[Lock, str]] = {}

    def key(self, cid: ConversationId) -> str:
        return f"{self.prefix}lock:{cid}"

    @contextlib.asynccontextmanager
    async def hold(self, cid: ConversationId, *, wait: bool = True) -> AsyncIterator[None]:
        from redis.asyncio.lock import Lock

        if self.health is not None and not self.health.available:
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
            if self.health is None or self.health.available:
                raise ConversationBusy(f"{cid} is held by another process")
            yield  # Redis failed while taking it: go on with the local lock only
            return
        keeper = asyncio.create_task(self._keep(lock, cid), name=f"membot:turnlock:{cid}")
        try:
            yield
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
            await self._release(lock, token, cid)

    async def _acquire(self, lock: Lock, cid: ConversationId, token: str, *, wait: bool) -> bool:
        from redis.exceptions import RedisError

        from membot.memory.redis_client import unavailable

        if self.health is None:
            # A failure here propagates (QUEUE=redis: the update is tried again later).
            with unavailable("turn lock"):
                await self._release_orphan(self.key(cid))
                return await self._poll(lock, token, wait=wait, budget=None)

        try:
            await self._release_orphan(self.key(cid))
            return await self._poll(lock, token, wait=wait, budget=self.budget)
        except (RedisError, TimeoutError, OSError) as exc:
            self._orphans[self.key(cid)] = (lock, token)  # the SET may have reached Redis
            self.health.failed(exc)
            return False

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
        from redis.exceptions import LockError, RedisError

        try:
            async with asyncio.timeout(self.budget if self.health is not None else None):
                await lock.release()
        except LockError:
            # It expired (the turn outlived extensions that failed): someone else may
            # hold it now, and theirs is not ours to release.
            log.warning("%s: the turn lock had expired before the turn ended", cid)
        except (RedisError, TimeoutError, OSError) as exc:
            # Released when the conversation's next turn comes (in this process), not left
            # to block it until it expires.
            self._orphans[self.key(cid)] = (lock, token)
            if self.health is None:
                from membot.memory.redis_client import unavailable

                with unavailable("turn lock"):
                    raise
            self.health.failed(exc)

    async def _release_orphan(self, name: str) -> None:
        """Release a lock of this process that Redis went down with (it may hold it still)."""
        orphan = self._orphans.get(name)
        if orphan is None:
            return
        lock, token = orphan
        async with asyncio.timeout(self.budget):
            await self._release_token(lock, token)
        del self._orphans[name]

    @staticmethod
    async def _release_token(lock: Lock, token: str) -> None:
        from redis.exceptions import LockError

        with contextlib.suppress(LockError):  # expired, or never reached Redis
            await lock.do_release(token.encode())

    async def _keep(self, lock: object, cid: ConversationId) -> None:
        """Re-arm the lock's timeout while the turn runs."""
        from redis.asyncio.lock import Lock
        from redis.exceptions import LockError, RedisError

        assert isinstance(lock, Lock)
        while True:
            await asyncio.sleep(self.timeout / 3)  # the lease's period, not synchronisation
            if self.health is not None and not self.health.available:
                continue  # the outage is already reported
            try:
                await lock.reacquire()
            except (LockError, RedisError) as exc:
                log.warning("%s: could not extend the turn lock: %s", cid, type(exc).__name__)
