"""How control updates (contract.py `is_control`: Telegram's Stop on a draft) reach the
runners, at once and never queued behind a chat's turn.

With the file journal the source and the runner are one process: a queue in memory. With
the Redis stream they may not be (`membot receive` puts, `membot worker`s take), and the
worker that runs a chat's turn now is not always the one that would read the chat's next
entry at once: a worker with WORKER_CONCURRENCY updates in hand reads nothing more until
one ends (the turn to stop may be one of them), and a shard being handed over is not read
until its turns in hand are done. So the receiver publishes them on one Redis pub/sub
channel, `{REDIS_PREFIX}q:control`, every worker listens, and the one running that answer
acts (core/stops.py). Pub/sub keeps nothing: a worker not listening at that moment (Redis
was down) misses the stop, and the answer goes on to its end.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from membot.intake.contract import Entry, entry_of, is_control
from membot.redis.errors import unavailable

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.client import PubSub

log = logging.getLogger(__name__)

Update = Mapping[str, Any]
# How long one look at the channel waits for a message.
LISTEN_TIMEOUT = 1.0


class LocalControls:
    """Control updates handed from `put` to `control` within one process."""

    def __init__(self) -> None:
        self._entries: deque[Entry] = deque()
        self._arrived = asyncio.Event()

    def split(self, batch: Iterable[Update]) -> list[Update]:
        """The batch without its control updates, which `next` gives from now on."""
        rest: list[Update] = []
        for update in batch:
            if is_control(update):
                self._entries.append(entry_of(update, json.dumps(update)))
                self._arrived.set()
            else:
                rest.append(update)
        return rest

    async def next(self) -> list[Entry]:
        while not self._entries:
            self._arrived.clear()
            await self._arrived.wait()
        entries = list(self._entries)
        self._entries.clear()
        return entries


class RedisControls:
    """Control updates from any receiver to every worker: Redis pub/sub."""

    def __init__(self, client: Redis, prefix: str) -> None:
        self.client = client
        self.channel = f"{prefix}q:control"
        self._pubsub: PubSub | None = None

    async def publish(self, update: Update) -> None:
        await self.client.publish(self.channel, json.dumps(update))

    async def listen(self) -> None:
        """Subscribed from now on (a worker, once it starts)."""
        if self._pubsub is None:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel)
            except BaseException:
                await pubsub.aclose()  # type: ignore[no-untyped-call]
                raise
            self._pubsub = pubsub

    async def next(self) -> list[Entry]:
        """What was published since the last look (waits up to LISTEN_TIMEOUT); a failure
        (Redis down) is raised, StorageUnavailable, and the next call subscribes again."""
        try:
            await self.listen()
            assert self._pubsub is not None
            message = await self._pubsub.get_message(timeout=LISTEN_TIMEOUT)
        except (RedisError, OSError) as exc:
            await self.close()
            with unavailable("stream control"):
                raise exc
        if message is None or message.get("type") != "message":
            return []
        try:
            update = json.loads(message["data"])
            return [entry_of(update, message["data"])]
        except (ValueError, KeyError, TypeError):
            log.warning("stream: a control message that is not an update was ignored")
            return []

    async def close(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            try:
                await pubsub.aclose()  # type: ignore[no-untyped-call]
            except (RedisError, OSError) as exc:
                log.debug("stream: closing the control channel: %s", type(exc).__name__)
