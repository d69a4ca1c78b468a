"""redis-py's errors, translated once, where a call to Redis is made.

Outside membot.redis and the Redis backends nothing catches redis-py's exceptions: a call
that gets no answer (refused, cut, timed out) raises `StorageUnavailable`, one whose answer
is an error (out of memory, a read-only replica, a script's error) `StorageRefused`, a
`StorageUnavailable` too, each with the client's error as its cause. So the front doors
answer one family, `Unavailable` (the API's 503, an update tried again), and the intake's
`transient()` asks only that.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterator
from typing import TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from membot.errors import StorageRefused, StorageUnavailable

_T = TypeVar("_T")

# redis-py nests its retries (the handshake of a new connection has its own), so a whole
# call also gets a deadline.
CALL_DEADLINE = 3.0

# What says the server did not answer (refused, cut, timed out), as opposed to an answer
# that is an error (a ResponseError: a refusal, a script's error).
UNREACHABLE: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    TimeoutError,
    OSError,
)
# Whatever a call to Redis may raise, translated or not: no answer, or an error answer.
FAILURES: tuple[type[BaseException], ...] = (StorageUnavailable, RedisError, *UNREACHABLE)


@contextlib.contextmanager
def unavailable(what: str) -> Iterator[None]:
    """Inside: redis-py's errors raise StorageUnavailable (no answer) or StorageRefused (an
    error answer), the cause kept, so front doors answer "unavailable" (503, the update
    tried again) rather than an internal error. Ours pass through as they are."""
    try:
        yield
    except StorageUnavailable:
        raise
    except UNREACHABLE as exc:
        raise StorageUnavailable(f"{what}: Redis did not answer ({type(exc).__name__})") from exc
    except RedisError as exc:
        raise StorageRefused(f"{what}: Redis refused ({type(exc).__name__})") from exc


async def call(awaitable: Awaitable[_T], what: str = "storage") -> _T:
    """One call to Redis within CALL_DEADLINE whatever redis-py's retries do, translated."""
    with unavailable(what):
        try:
            async with asyncio.timeout(CALL_DEADLINE):
                return await awaitable
        except TimeoutError:
            raise RedisTimeoutError(f"no answer from Redis within {CALL_DEADLINE:g} s") from None


def reason(exc: BaseException) -> str:
    """What failed, for a log line: the client's own error behind a StorageUnavailable."""
    while isinstance(exc, StorageUnavailable) and exc.__cause__ is not None:
        exc = exc.__cause__
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
