"""Wiring: build the long-lived objects once, hand them to aiogram, poll, shut down cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import TYPE_CHECKING, Any, Literal

from aiogram import Bot, Dispatcher
from aiogram.client.default import DefaultBotProperties
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.methods import (
    DeleteWebhook,
    GetMe,
    GetUpdates,
    SendChatAction,
    SendMessage,
    SetMyCommands,
)
from aiogram.methods.base import Response
from aiogram.types import BotCommand, LinkPreviewOptions, Update

from membot.bot import texts
from membot.bot.handlers import build_routers
from membot.bot.handlers.chat_settings import ChatAdmins
from membot.bot.inbox import Inbox, InboxMiddleware, JournalUpdates
from membot.bot.middlewares import AccessMiddleware, ChatSequencer
from membot.bot.throttle import Throttle
from membot.config import Settings
from membot.ratelimit import build_limits
from membot.wiring import Core, build_core, shutdown_grace

if TYPE_CHECKING:
    from membot.api.server import ApiServer
    from membot.bot.scaleout import QueueFront
    from membot.bot.webhook import WebhookServer

# What a process does: `run` receives and answers; with QUEUE=redis, `receive` only puts
# updates in the stream and `worker` only answers from it.
ProcessRole = Literal["run", "receive", "worker"]

log = logging.getLogger(__name__)

# aiogram parses every Bot API reply with a `Response[T]` pydantic model that it creates per
# call; pydantic caches those classes only weakly, so each garbage collection drops them and
# the next call rebuilds one (~10 ms). Holding them keeps the hot path off that cliff.
_RESPONSE_MODELS: list[type[Any]] = []
_HOT_METHODS = (GetUpdates, SendMessage, SendChatAction, GetMe, DeleteWebhook, SetMyCommands)


def pin_response_models() -> None:
    if not _RESPONSE_MODELS:
        _RESPONSE_MODELS.extend(Response[m.__returning__] for m in _HOT_METHODS)  # type: ignore[name-defined]


class MembotApp:
    """The Telegram front door: settings in, polling loop out. `run()` until `stop()` or a
    signal. The conversation core comes from `membot.wiring`, shared with the HTTP API."""

    def __init__(
        self, settings: Settings, core: Core | None = None, *, role: ProcessRole = "run"
    ) -> None:
        pin_response_models()
        if settings.telegram_bot_token is None:
            raise ValueError("TELEGRAM_BOT_TOKEN is required for the bot")
        if role != "run" and settings.queue.backend != "redis":
            raise ValueError(f"`membot {role}` needs QUEUE=redis")
        self.settings = settings
        self.role = role
        self.core = core or build_core(settings)
        self.repository = self.core.repository
        self.service = self.core.service
        self.api: ApiServer | None = None
        if settings.api_port is not None:
            from membot.api.server import ApiServer  # only when the API is on

            self.api = ApiServer(settings, self.core)
        self.bot = Bot(
            token=settings.telegram_bot_token.get_secret_value(),
            session=AiohttpSession(api=TelegramAPIServer.from_base(settings.telegram_api_base)),
            default=DefaultBotProperties(link_preview=LinkPreviewOptions(is_disabled=True)),
        )
        # Telegram's limits on sending: shared by every process through Redis with QUEUE=redis.
        self.bot.session.middleware(Throttle(build_limits(settings, self.core.redis)))
        self.inbox = Inbox(settings.data_dir)
        self.queue: QueueFront | None = None
        if settings.queue.backend == "redis":
            from membot.bot.scaleout import QueueFront

            self.queue = QueueFront(self, receive=role != "worker", work=role != "receive")
        else:
            self.bot.session.middleware(JournalUpdates(self.inbox, settings.allowed_user_ids))
        self.webhook: WebhookServer | None = None
        self._replays: set[asyncio.Task[Any]] = set()
        self._stopped = asyncio.Event()
        # No FSM: nothing here uses aiogram's per-user state, so no storage is kept for it.
        self.dispatcher = Dispatcher(
            disable_fsm=True,
            settings=settings,
            service=self.service,
            repository=self.repository,
            ledger=self.core.ledger,
            quota=self.core.quota,
            admins=ChatAdmins(settings.admin_user_ids),
        )
        self.sequencer = ChatSequencer(self.dispatcher, self.service)
        self.dispatcher.update.outer_middleware(self.sequencer)
        # Inside the sequencer: an update is marked done before the chat's next one starts,
        # and shutdown waits for that too. (With the queue: a repeat is recognised while
        # the chat's turn is held.)
        if self.queue is not None:
            self.dispatcher.update.outer_middleware(self.queue.repeats)
        else:
            self.dispatcher.update.outer_middleware(InboxMiddleware(self.inbox))
        access = AccessMiddleware(settings.allowed_user_ids)
        self.dispatcher.message.middleware(access)
        self.dispatcher.callback_query.middleware(access)
        self.dispatcher.include_routers(*build_routers())
        self.dispatcher.startup.register(self._on_startup)
        self.dispatcher.shutdown.register(self._on_shutdown)

    async def _on_startup(self, bot: Bot) -> None:
        replay: list[dict[str, Any]] = []
        try:
            await self.core.start()
            if self.role != "worker":
                # The menu in Russian for Russian-speaking clients, English for everyone else
                # (the default scope last, so the default is what a plain getMyCommands shows).
                for code in ("ru", ""):
                    await bot.set_my_commands(
                        [BotCommand(command=c, description=d) for c, d in texts.get(code).COMMANDS],
                        language_code=code or None,
                    )
            if self.queue is not None:
                await self.queue.start()
            else:
                replay = await self.inbox.unanswered(self.repository)
                await self._start_local_receiver(bot)
            if self.api is not None:
                await self.api.start()  # a port already taken fails the start-up cleanly
        except BaseException:
            # aiogram runs no shutdown when startup fails: release everything, then fail.
            await self._release()
            await bot.session.close()
            raise
        # Messages a crashed run received but never answered go first: each takes its chat's
        # place in line before polling brings anything new.
        for record in replay:  # each was read back already (Inbox.unanswered)
            update = Update.model_validate(record, context={"bot": bot})
            task = asyncio.create_task(self.dispatcher.feed_update(bot, update, replay=True))
            self._replays.add(task)
            task.add_done_callback(self._replays.discard)
        if not self.settings.allowed_user_ids:
            log.warning("ALLOWED_USER_IDS is empty: the bot answers everyone")
        log.info(
            "membot %s started: queue=%s telegram=%s model=%s data_dir=%s window=%d "
            "summary_every=%d tools=%s mode=%s",
            self.role,
            self.settings.queue.backend,
            self.settings.telegram_mode,
            self.settings.default_model,
            self.settings.data_dir,
            self.settings.window_size,
            self.settings.summary_every,
            ",".join(self.settings.enabled_tools) or "none",
            self.settings.tool_mode,
        )

    async def _start_local_receiver(self, bot: Bot) -> None:
        """QUEUE=local: polling (aiogram's loop, started by `run`) or this process's webhook."""
        if self.settings.telegram_mode == "polling":
            await bot.delete_webhook(drop_pending_updates=False)
            return
        from membot.bot.scaleout import local_intake, start_webhook

        self.webhook = await start_webhook(self, local_intake(self))

    async def _on_shutdown(self) -> None:
        # Receiving has stopped; the API takes no new requests either. Let updates and
        # requests already being answered finish, then the summaries.
        if self.webhook is not None:
            await self.webhook.close()
        if self.queue is not None:
            await self.queue.stop(shutdown_grace(self.settings))
        if self.api is not None:
            await self.api.stop_accepting()
        await self.service.wait_idle(shutdown_grace(self.settings))
        await self.inbox.flush()
        if self._replays:  # replayed updates pass through the sequencer: done by now, or stuck
            await asyncio.wait(self._replays, timeout=1.0)
        await self._release()
        log.info("membot stopped")

    async def _release(self) -> None:
        if self.webhook is not None:
            await self.webhook.close()
        if self.queue is not None:
            await self.queue.close()
        if self.api is not None:
            await self.api.close()
        await self.core.aclose()

    @property
    def _aiogram_polls(self) -> bool:
        """aiogram's own polling loop receives (QUEUE=local, polling); else the queue's
        receiver or a webhook does, and `run` only starts up and waits."""
        return self.queue is None and self.settings.telegram_mode == "polling"

    async def run(self, *, handle_signals: bool = True) -> None:
        if self._aiogram_polls:
            await self.dispatcher.start_polling(
                self.bot,
                handle_signals=handle_signals,
                allowed_updates=self.dispatcher.resolve_used_update_types(),
            )
            return
        # Everything else receives on its own (webhook, the queue): start up, wait, shut down.
        await self.dispatcher.emit_startup(bot=self.bot)
        try:
            with _signals(self._stopped.set) if handle_signals else contextlib.nullcontext():
                await self._stopped.wait()
        finally:
            try:
                await self.dispatcher.emit_shutdown(bot=self.bot)
            finally:
                await self.bot.session.close()

    async def stop(self) -> None:
        if self._aiogram_polls:
            await self.dispatcher.stop_polling()
        else:
            self._stopped.set()


@contextlib.contextmanager
def _signals(stop: Any) -> Any:
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stop)
    try:
        yield
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
