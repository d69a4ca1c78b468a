"""The Redis client and what one call to it may cost (STORAGE=redis).

A process has one client, built by membot.wiring from the settings and handed to every user
of Redis (the repository, the turn locks, the summary lease, the usage ledger, Telegram's
shared limits, the queue). `call` runs one repository call within a deadline and says
"Redis did not answer" the one way every layer understands: `StorageUnavailable`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterator
from typing import TypeVar

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from membot.memory.base import StorageUnavailable

_T = TypeVar("_T")

# redis-py's defaults can hold one call for tens of seconds against a dead server. Each read
# and connect gets 1 s and a failed call 2 more tries, but redis-py nests its retries (the
# handshake of a new connection has its own): so a whole call also gets a deadline.
CONNECT_TIMEOUT = 1.0
SOCKET_TIMEOUT = 1.0
RETRIES = 2
CALL_DEADLINE = 3.0
HEALTH_CHECK_INTERVAL = 15
MAX_CONNECTIONS = 64

# What says the server did not answer (refused, cut, timed out), as opposed to an answer
# that is an error (a ResponseError: a refusal, a script's error).
UNREACHABLE: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    TimeoutError,
    OSError,
)


def create_client(
    url: str,
    *,
    connect_timeout: float = CONNECT_TIMEOUT,
    socket_timeout: float = SOCKET_TIMEOUT,
    retries: int = RETRIES,
) -> Redis:
    """One pool, explicit timeouts and bounded retries; connects on first use, not here.
    (membot.wiring chooses them: short behind the breaker, longer for the queue.)"""
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=MAX_CONNECTIONS,
        timeout=connect_timeout + socket_timeout,  # waiting for a free connection
        decode_responses=True,
        socket_connect_timeout=connect_timeout,
        socket_timeout=socket_timeout,
        health_check_interval=HEALTH_CHECK_INTERVAL,
        retry=Retry(ExponentialBackoff(cap=0.25, base=0.05), retries),
    )
    return Redis.from_pool(pool)


@contextlib.contextmanager
def unavailable(what: str) -> Iterator[None]:
    """Inside: Redis not answering raises StorageUnavailable (its cause kept), so front doors
    answer "unavailable" (503, the update tried again) rather than an internal error."""
    try:
        yield
    except UNREACHABLE as exc:
        raise StorageUnavailable(f"{what}: Redis did not answer ({type(exc).__name__})") from exc


async def call(awaitable: Awaitable[_T]) -> _T:
    """One call to Redis within CALL_DEADLINE whatever redis-py's retries do; no answer is
    StorageUnavailable, an error answer a RedisError."""
    with unavailable("storage"):
        try:
            async with asyncio.timeout(CALL_DEADLINE):
                return await awaitable
        except TimeoutError:
            raise RedisTimeoutError(f"no answer from Redis within {CALL_DEADLINE:g} s") from None
