"""Background work done once per conversation across processes: a lease (STORAGE=redis).

Inside one process `TaskSupervisor` runs at most one summary per conversation. With several
processes on one Redis, each would make its own: the same messages sent to the model twice,
and two summaries merged over each other. So the summarizer first takes a lease,
`{REDIS_PREFIX}lease:summary:<conversation>`: redis-py's `Lock` (SET NX PX with a random
token, released only by its owner through a Lua script), taken without waiting. A process
that finds it held skips the summary: the holder is making it, and whatever it leaves due
is picked up at a later turn. The lease expires on its own (a process killed mid-summary
blocks nobody for longer than `timeout`), so it is set well above a model call with its
retries; it is not extended, since a summary is one model call. While Redis is known to be
down (the health object's breaker is open) no lease is asked for: the summary waits; and
a failure to take it is the same as finding it held, with or without a breaker.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from redis.asyncio import Redis
from redis.asyncio.lock import Lock
from redis.exceptions import LockError, RedisError

from membot.ids import ConversationId
from membot.redis.health import ALWAYS_UP, Health

log = logging.getLogger(__name__)

# How many model calls the lease outlasts (a call and the client's retries), plus a margin.
LEASE_CALLS = 3
LEASE_MARGIN = 30.0


class RedisSummaryLease:
    """core.lease.SummaryLease as a Redis key with an owner token: SET NX PX, owner-checked
    release."""

    def __init__(
        self, client: Redis, prefix: str, *, timeout: float, health: Health = ALWAYS_UP
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.timeout = timeout
        self.health = health

    def key(self, cid: ConversationId) -> str:
        return f"{self.prefix}lease:summary:{cid}"

    @contextlib.asynccontextmanager
    async def hold(self, cid: ConversationId) -> AsyncIterator[bool]:
        if not self.health.available:
            yield False  # Redis is down: the summary is made at a later turn
            return
        # thread_local=False: every coroutine of this process runs in one thread, and each
        # must keep its own token.
        lock = Lock(
            self.client,
            self.key(cid),
            timeout=self.timeout,
            thread_local=False,
            raise_on_release_error=False,
        )
        try:
            acquired = await lock.acquire(blocking=False)
        except RedisError as exc:
            # Redis is failing: the summary waits for a later turn, as after a model error.
            log.debug("%s: summary lease not taken (%s)", cid, type(exc).__name__)
            self.health.failed(exc)
            acquired = False
        if not acquired:
            yield False
            return
        try:
            yield True
        finally:
            try:
                await lock.release()
            except LockError:
                # Expired first: someone else may hold it now, and theirs is not ours to free.
                log.warning("%s: the summary lease had expired before the summary ended", cid)
            except RedisError as exc:
                log.debug("%s: summary lease not released (%s)", cid, type(exc).__name__)


def lease_timeout(llm_timeout: float) -> float:
    return llm_timeout * LEASE_CALLS + LEASE_MARGIN


def summary_lease(
    client: Redis | None, prefix: str, *, llm_timeout: float, health: Health = ALWAYS_UP
) -> RedisSummaryLease | None:
    """The summary lease: with STORAGE=redis (the wiring gives the process's one client only
    then), a Redis lease on that client; None otherwise (the files backend has one process
    per DATA_DIR)."""
    if client is None:
        return None
    return RedisSummaryLease(client, prefix, timeout=lease_timeout(llm_timeout), health=health)
