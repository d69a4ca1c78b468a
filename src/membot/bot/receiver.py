"""The receiver with QUEUE=redis and long polling: Telegram's updates into the stream.

Asking for the next batch (`getUpdates` with a higher offset) tells Telegram the previous one
was received, so a batch is asked for only once every update of the last one is in the
stream. While Redis is unreachable nothing more is fetched: the updates wait at Telegram and
come once Redis is back. Only one receiver polls at a time (a lease, queue/shards.py); any
other `membot run` waits as a stand-in and takes over when the lease lapses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiogram import Bot
from aiogram.exceptions import TelegramConflictError, TelegramNetworkError, TelegramServerError
from aiogram.methods import GetUpdates
from redis.exceptions import RedisError

from membot.queue.shards import ReceiverLease
from membot.queue.stream import UpdateStream

if TYPE_CHECKING:
    from aiogram.types import Update

log = logging.getLogger(__name__)

# Longest wait after a failed poll or a failed write to Redis.
MAX_BACKOFF = 5.0


class StreamReceiver:
    def __init__(
        self,
        bot: Bot,
        stream: UpdateStream,
        lease: ReceiverLease,
        *,
        allowed_updates: Sequence[str],
        claim_idle: float,
    ) -> None:
        self.bot = bot
        self.stream = stream
        self.lease = lease
        self.allowed_updates = list(allowed_updates)
        # A poll waits at most a third of the lease, so the lease is renewed in time.
        self.poll_timeout = max(1, min(25, int(claim_idle / 3)))
        self.standby = max(claim_idle / 3, 0.2)
        self.received = 0
        self._offset: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._polling = False
        self._redis_down = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="receiver")

    async def stop(self) -> None:
        """Stop polling. A poll in progress is cancelled: nothing it brought was confirmed,
        so Telegram sends it again to whoever polls next."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(RedisError):
            await self.lease.release()

    async def _run(self) -> None:
        backoff = 0.0
        while True:
            if backoff:
                await asyncio.sleep(backoff)
            try:
                if not await self.lease.hold():
                    self._poller(False)
                    backoff = self.standby
                    continue
                self._redis(up=True)
                self._poller(True)
                updates = await self.bot(
                    GetUpdates(
                        offset=self._offset,
                        timeout=self.poll_timeout,
                        allowed_updates=self.allowed_updates,
                    ),
                    request_timeout=self.poll_timeout + 10,
                )
                await self._enqueue(updates)
                backoff = 0.0
            except RedisError as exc:
                self._redis(up=False, exc=exc)
                backoff = min(max(backoff * 2, 0.25), MAX_BACKOFF)
            except TelegramConflictError:
                log.warning("receiver: another process polls this bot (409 Conflict); waiting")
                backoff = MAX_BACKOFF
            except (TelegramNetworkError, TelegramServerError) as exc:
                log.warning("receiver: polling failed (%s); retrying", type(exc).__name__)
                backoff = min(max(backoff * 2, 0.5), MAX_BACKOFF)

    async def _enqueue(self, updates: list[Update]) -> None:
        for update in updates:
            payload: dict[str, Any] = update.model_dump(
                mode="json", exclude_none=True, by_alias=True
            )
            # Redis errors propagate: the offset stays, so the rest comes again (and what was
            # queued already is recognised by its mark).
            await self.stream.publish(payload)
            self._offset = update.update_id + 1
            self.received += 1

    def _poller(self, active: bool) -> None:
        if active != self._polling:
            self._polling = active
            log.info(
                "receiver: %s", "polling Telegram" if active else "standing by (another polls)"
            )

    def _redis(self, *, up: bool, exc: BaseException | None = None) -> None:
        if up and self._redis_down:
            self._redis_down = False
            log.warning("receiver: Redis is back; polling again")
        elif not up and not self._redis_down:
            self._redis_down = True
            log.warning(
                "receiver: Redis is unreachable (%s): polling stops, updates wait at Telegram",
                type(exc).__name__,
            )
