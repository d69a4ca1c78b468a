"""Storage, built from the settings: the process's one Redis client and its health object,
the repository STORAGE names (behind the outage spool when the breaker guards it), and the
turn locks shared across processes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from membot.config import Settings
from membot.core.turnlock import TurnLocks
from membot.memory.contract.repository import ChatRepository
from membot.memory.files import FileRepository
from membot.redis.health import ALWAYS_UP, Health
from membot.schedule.store import TaskStore

if TYPE_CHECKING:
    from membot.redis.client import Redis

# Behind the breaker a dead Redis must cost an answer about half a second at most.
REDIS_CONNECT_TIMEOUT = 0.25
REDIS_SOCKET_TIMEOUT = 0.5
# With QUEUE=redis there is no breaker: a failed call leaves the update in the stream, to be
# tried again, so calls get the client's usual timeouts and retries. The same client reads
# the stream, whose reads block for up to 1 s (intake/redis.py BLOCK_MS): that fits within
# the socket timeout, with the 3 s any other call gets on top.
QUEUE_CONNECT_TIMEOUT = 1.0
QUEUE_SOCKET_TIMEOUT = 4.0


def build_redis(settings: Settings) -> tuple[Redis, Health]:
    """The process's one Redis client and its health object: with QUEUE=local the breaker.
    Connects nowhere: Redis is reached on first use.

    With QUEUE=local the bot answers while Redis is down (memory/outage/repository.py): the client
    gets short timeouts and one retry, as the breaker, not a retry, rides out an outage. With
    QUEUE=redis, Redis is the queue too, and an update is not answered without it: it waits
    in the stream (or in Telegram), as an answer given from a local spool could be given
    again, or out of order, by another worker once Redis is back (the handled marks, the
    acknowledgements and the turn locks are all in Redis). So there is no breaker then (the
    health object is always up), and a call Redis does not answer raises StorageUnavailable:
    the update is tried again, and an HTTP request is answered 503 SERVICE_UNAVAILABLE."""
    from membot.redis.client import create_client  # imported late: only where used
    from membot.redis.health import RedisHealth

    url = settings.redis.url.get_secret_value()
    if settings.queue.backend == "redis":
        client = create_client(
            url, connect_timeout=QUEUE_CONNECT_TIMEOUT, socket_timeout=QUEUE_SOCKET_TIMEOUT
        )
        return client, ALWAYS_UP
    client = create_client(
        url, connect_timeout=REDIS_CONNECT_TIMEOUT, socket_timeout=REDIS_SOCKET_TIMEOUT, retries=1
    )
    return client, RedisHealth(client.ping)


def build_repository(
    settings: Settings, redis: Redis | None = None, health: Health = ALWAYS_UP
) -> ChatRepository:
    """The backend STORAGE names: for STORAGE=redis on the process's client, and with the
    breaker as its health object, behind it and a spool under DATA_DIR (memory/outage/)."""
    storage, shared = settings.storage, settings.redis
    if storage.backend != "redis":
        return FileRepository(storage.data_dir)
    if redis is None:
        raise ValueError("STORAGE=redis: the repository needs the client (build_redis)")
    from membot.memory.outage import SPOOL_NAME, ResilientRepository
    from membot.memory.redis import RedisRepository  # imported late: only where used
    from membot.redis.health import RedisHealth

    repository = RedisRepository(
        redis,
        prefix=shared.prefix,
        max_messages=shared.max_messages,
        ttl=shared.conversation_ttl,
    )
    if not isinstance(health, RedisHealth):
        return repository  # no breaker: nothing is answered without Redis
    return ResilientRepository(repository, health, storage.data_dir / SPOOL_NAME)


def build_task_store(settings: Settings, redis: Redis | None, health: Health) -> TaskStore:
    """Where the chats' tasks are kept: beside their memory (STORAGE). With Redis, on the
    process's client and without the outage spool: a task is not set while Redis is down
    (the tool says so), and a due one waits for it."""
    if settings.storage.backend != "redis":
        from membot.schedule.files import FileTaskStore

        return FileTaskStore(settings.storage.data_dir)
    if redis is None:
        raise ValueError("STORAGE=redis: the task store needs the client (build_redis)")
    from membot.schedule.redis import RedisTaskStore  # imported late: only where used

    return RedisTaskStore(redis, settings.redis.prefix)


def build_turn_locks(settings: Settings, redis: Redis | None, health: Health) -> TurnLocks | None:
    """With Redis, several processes may share conversations: a conversation's turn is then
    also held across them (membot/redis/turnlock.py). While the breaker is open (QUEUE=local)
    the turn is held in this process only."""
    if redis is None:
        return None
    from membot.redis.turnlock import RedisTurnLocks  # imported late: only where used

    # The lease outlasts a model call that is retried: a killed process blocks its
    # conversations for at most this long. With QUEUE=redis another worker takes a dead one's
    # updates after CLAIM_IDLE, and the lock must not hold it up longer than that.
    queue, prefix = settings.queue, settings.redis.prefix
    timeout = queue.claim_idle if queue.backend == "redis" else 30.0
    return RedisTurnLocks(redis, prefix, timeout=timeout, health=health)
