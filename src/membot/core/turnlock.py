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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from membot.ids import ConversationId

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger(__name__)


class TurnBusy(Exception):
    """The conversation's turn is held by another process (and the caller would not wait)."""


class TurnLocks(Protocol):
    def hold(
        self, cid: ConversationId, *, wait: bool = True
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold the conversation's turn; TurnBusy at once if `wait` is False and it is held."""
        ...


class RedisTurnLocks:
    def __init__(
        self, client: Redis, prefix: str, *, timeout: float = 30.0, poll: float = 0.05
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.timeout = timeout
        self.poll = poll

    def key(self, cid: ConversationId) -> str:
        return f"{self.prefix}lock:{cid}"

    @contextlib.asynccontextmanager
    async def hold(self, cid: ConversationId, *, wait: bool = True) -> AsyncIterator[None]:
        from redis.asyncio.lock import Lock
        from redis.exceptions import LockError

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
        if not await lock.acquire(blocking=wait):
            raise TurnBusy(str(cid))
        keeper = asyncio.create_task(self._keep(lock, cid), name=f"membot:turnlock:{cid}")
        try:
            yield
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
            try:
                await lock.release()
            except LockError:
                # It expired (the turn outlived extensions that failed): someone else may
                # hold it now, and theirs is not ours to release.
                log.warning("%s: the turn lock had expired before the turn ended", cid)

    async def _keep(self, lock: object, cid: ConversationId) -> None:
        """Re-arm the lock's timeout while the turn runs."""
        from redis.asyncio.lock import Lock
        from redis.exceptions import LockError, RedisError

        assert isinstance(lock, Lock)
        while True:
            await asyncio.sleep(self.timeout / 3)  # the lease's period, not synchronisation
            try:
                await lock.reacquire()
            except (LockError, RedisError) as exc:
                log.warning("%s: could not extend the turn lock: %s", cid, type(exc).__name__)
