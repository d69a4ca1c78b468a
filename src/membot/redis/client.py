"""The Redis client (STORAGE=redis).

A process has one client, built by membot.wiring from the settings and handed to every user
of Redis (the repository, the turn locks, the summary lease, the usage ledger, Telegram's
shared limits, the stream). What a call may cost is bounded here (timeouts, retries) and in
membot/redis/errors.py (a whole call's deadline).
"""

from __future__ import annotations

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

# The client's type, for the annotations of those that hand it on (membot.wiring, roles).
__all__ = ["Redis", "create_client"]

# redis-py's defaults can hold one call for tens of seconds against a dead server. Each read
# and connect gets 1 s and a failed call 2 more tries (errors.py gives a whole call a
# deadline besides).
CONNECT_TIMEOUT = 1.0
SOCKET_TIMEOUT = 1.0
RETRIES = 2
HEALTH_CHECK_INTERVAL = 15
MAX_CONNECTIONS = 64


def create_client(
    url: str,
    *,
    connect_timeout: float = CONNECT_TIMEOUT,
    socket_timeout: float = SOCKET_TIMEOUT,
    retries: int = RETRIES,
) -> Redis:
    """One pool, explicit timeouts and bounded retries; connects on first use, not here.
    (membot.wiring chooses them: short behind the breaker, longer for the stream.)"""
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
