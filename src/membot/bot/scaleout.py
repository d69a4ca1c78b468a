"""The Telegram side of QUEUE=redis (and of a webhook with QUEUE=local).

`QueueFront` is one process's part: the receiver (polling or webhook) adds updates to the
stream, the worker takes them and feeds them to the dispatcher, which answers them as it
would a polled update. See queue/ for the stream, the shards and the worker itself.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiogram import BaseMiddleware
from aiogram.types import TelegramObject, Update
from redis.exceptions import RedisError

from membot.bot.inbox import JournalUpdates, answered
from membot.bot.receiver import StreamReceiver
from membot.bot.webhook import Intake, IntakeUnavailable, WebhookServer
from membot.config import ConfigError
from membot.queue.shards import ReceiverLease, ShardLeases
from membot.queue.stream import Entry, QueueMismatch, UpdateStream
from membot.queue.worker import NotHolder, StreamWorker

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from membot.bot.app import MembotApp

log = logging.getLogger(__name__)


def consumer_name() -> str:
    """Unique per process, readable in XINFO: host, pid, and a nonce (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class QueueFront:
    def __init__(self, app: MembotApp, *, receive: bool, work: bool) -> None:
        self.app = app
        self.settings = settings = app.settings
        self.receive = receive
        self.work = work
        self.consumer = consumer_name()
        # The process's one client (membot.wiring: its timeouts fit a read of BLOCK_MS).
        assert app.core.redis is not None, "QUEUE=redis needs STORAGE=redis"
        self.client: Redis = app.core.redis
        self.stream = UpdateStream(self.client, settings.redis_prefix, settings.queue_shards)
        self.repeats = QueueRepeats(self, app)
        self.worker: StreamWorker | None = None
        self.receiver: StreamReceiver | None = None
        self.webhook: WebhookServer | None = None

    async def start(self) -> None:
        try:
            await self.stream.prepare()
        except QueueMismatch as exc:
            raise ConfigError(f"configuration error: {exc}") from None
        if self.work:
            leases = ShardLeases(
                self.client, self.settings.redis_prefix, self.consumer, ttl=self.settings.claim_idle
            )
            self.worker = StreamWorker(
                self.stream,
                leases,
                self._handle,
                concurrency=self.settings.worker_concurrency,
                claim_idle=self.settings.claim_idle,
            )
            await self.worker.start()
        if not self.receive:
            return
        bot = self.app.bot
        if self.settings.telegram_mode == "webhook":
            self.webhook = await start_webhook(self.app, self._publish)
            return
        await bot.delete_webhook(drop_pending_updates=False)
        lease = ReceiverLease(
            self.client, self.settings.redis_prefix, self.consumer, ttl=self.settings.claim_idle
        )
        self.receiver = StreamReceiver(
            bot,
            self.stream,
            lease,
            allowed_updates=self.app.dispatcher.resolve_used_update_types(),
            claim_idle=self.settings.claim_idle,
        )
        self.receiver.start()

    async def stop(self, grace: float) -> None:
        """Receiving stops first; then the worker finishes its turns in progress."""
        if self.receiver is not None:
            await self.receiver.stop()
        if self.webhook is not None:
            await self.webhook.close()
        if self.worker is not None:
            await self.worker.stop(grace)

    async def close(self) -> None:
        return None  # the client is the core's, closed with it

    async def _handle(self, entry: Entry) -> None:
        bot = self.app.bot
        update = Update.model_validate_json(entry.data, context={"bot": bot})
        result = await self.app.dispatcher.feed_update(bot, update, queue_entry=entry)
        if isinstance(result, NotHolder):  # returned, not raised: see QueueRepeats
            raise result

    async def _publish(self, update: dict[str, Any], raw: str) -> None:
        try:
            await self.stream.publish(update, raw)
        except RedisError as exc:
            raise IntakeUnavailable(f"Redis: {type(exc).__name__}") from None


async def start_webhook(app: MembotApp, intake: Intake) -> WebhookServer:
    """Listen, then register WEBHOOK_URL verbatim with Telegram. It stays registered when
    the process stops, so Telegram keeps the updates and retries until a receiver is back."""
    settings = app.settings
    assert settings.webhook_url is not None and settings.webhook_secret is not None  # validated
    server = WebhookServer(
        host=settings.webhook_host,
        port=settings.webhook_port,
        path=settings.telegram.webhook_path,
        secret=settings.webhook_secret.get_secret_value(),
        intake=intake,
    )
    await server.start()
    try:
        await app.bot.set_webhook(
            url=settings.webhook_url,
            secret_token=settings.webhook_secret.get_secret_value(),
            allowed_updates=app.dispatcher.resolve_used_update_types(),
            drop_pending_updates=False,
        )
    except BaseException:
        await server.close()
        raise
    return server


def local_intake(app: MembotApp) -> Intake:
    """QUEUE=local with a webhook: journal the update in the file inbox (as polling does),
    then answer it in this process."""
    journal = JournalUpdates(app.inbox, app.settings.allowed_user_ids)
    tasks: set[asyncio.Task[Any]] = app._replays  # owned and awaited by the app at shutdown

    async def intake(payload: dict[str, Any], raw: str) -> None:
        bot = app.bot
        update = Update.model_validate(payload, context={"bot": bot})
        try:
            if await journal.worth_keeping(update, bot):
                await app.inbox.record([update])
        except OSError as exc:
            raise IntakeUnavailable(f"inbox: {exc.strerror or exc}") from None
        task = asyncio.create_task(app.dispatcher.feed_update(bot, update))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    return intake


class QueueRepeats(BaseMiddleware):
    """Outer update middleware, inside the chat's turn: is this update still this worker's
    to answer? Not when another worker holds its shard now (it is left pending for that one,
    queue/worker.py `fence`; the NotHolder is returned, not raised, as an exception would go
    through the error handlers), nor when it was marked handled. An update taken over from
    another worker (or tried again after a failure) is also skipped if its question is in the
    chat's archive (its turn was stored: the answer went out, or the worker died in the
    instant between the two). A handled update is acknowledged before the turn is let go."""

    def __init__(self, front: QueueFront, app: MembotApp) -> None:
        self.front = front
        self.app = app

    async def __call__(
        self,
        handler: Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]],
        event: TelegramObject,
        data: dict[str, Any],
    ) -> Any:
        entry: Entry | None = data.get("queue_entry")
        worker = self.front.worker
        if entry is None or worker is None or not isinstance(event, Update):
            return await handler(event, data)
        try:
            if await worker.fence(entry):
                return None
        except NotHolder as lost:
            return lost
        message = event.message
        if (
            entry.redelivered
            and message is not None
            and message.text
            and await answered(self.app.repository, message.chat.id, message.message_id)
        ):
            log.info("update %s was answered before it was taken over", event.update_id)
            return None
        result = await handler(event, data)
        try:
            await worker.done(entry)
        except RedisError as exc:  # acknowledged after the turn instead, with the worker's tries
            log.debug("update %s: not acknowledged in its turn: %s", entry.update_id, exc)
        return result
