"""Wiring: build the long-lived objects once, hand them to aiogram, poll, shut down cleanly."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

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

from membot.agent import Agent
from membot.bot import texts
from membot.bot.handlers import build_routers
from membot.bot.inbox import Inbox, InboxMiddleware, JournalUpdates
from membot.bot.middlewares import AccessMiddleware, ChatSequencer
from membot.config import Settings
from membot.llm.client import ChatModel, OpenAIChatModel
from membot.llm.prompt import PromptBuilder
from membot.llm.summarizer import Summarizer
from membot.llm.tools import ToolExecutor, make_mode
from membot.llm.tools.builtin import builtin
from membot.memory.base import ChatRepository
from membot.memory.files import FileRepository
from membot.search import HistorySearch

log = logging.getLogger(__name__)

# With ENABLE_RETRY, the openai client's own retries (with backoff) after a first failure.
LLM_RETRIES = 2


def shutdown_grace(settings: Settings) -> float:
    """How long shutdown waits for answers in progress. Telegram already counts those updates
    as delivered, so one cut short is a message never answered: wait long enough for a turn
    that is waiting on the model to get its answer (or time out) and send it."""
    attempts = 1 + (LLM_RETRIES if settings.enable_retry else 0)
    return attempts * settings.llm_timeout + 10.0


# aiogram parses every Bot API reply with a `Response[T]` pydantic model that it creates per
# call; pydantic caches those classes only weakly, so each garbage collection drops them and
# the next call rebuilds one (~10 ms). Holding them keeps the hot path off that cliff.
_RESPONSE_MODELS: list[type[Any]] = []
_HOT_METHODS = (GetUpdates, SendMessage, SendChatAction, GetMe, DeleteWebhook, SetMyCommands)


def pin_response_models() -> None:
    if not _RESPONSE_MODELS:
        _RESPONSE_MODELS.extend(Response[m.__returning__] for m in _HOT_METHODS)  # type: ignore[name-defined]


def build_model(settings: Settings) -> ChatModel:
    return OpenAIChatModel(
        api_key=settings.openrouter_api_key.get_secret_value(),
        base_url=settings.openrouter_base_url,
        model=settings.openrouter_model,
        timeout=settings.llm_timeout,
        retries=LLM_RETRIES if settings.enable_retry else 0,
    )


def build_agent(settings: Settings, model: ChatModel, repository: ChatRepository) -> Agent:
    registry = builtin.subset(settings.enabled_tools)
    return Agent(
        model=model,
        repository=repository,
        prompts=PromptBuilder(settings.system_prompt),
        summarizer=Summarizer(
            model,
            repository,
            every=settings.summary_every,
            language=settings.summary_language,
        ),
        window_size=settings.window_size,
        tools=ToolExecutor(registry, timeout=settings.tool_timeout) if registry else None,
        tool_mode=make_mode(settings.tool_mode),
        max_tool_rounds=settings.tool_max_iterations,
        # The index lives beside the archive it indexes: DATA_DIR/<chat_id>/search.sqlite3.
        search=HistorySearch(repository, settings.data_dir),
    )


class MembotApp:
    """One bot process: settings in, polling loop out. `run()` until `stop()` or a signal."""

    def __init__(self, settings: Settings) -> None:
        pin_response_models()
        self.settings = settings
        self.repository: ChatRepository = FileRepository(settings.data_dir)
        self.model = build_model(settings)
        self.agent = build_agent(settings, self.model, self.repository)
        self.bot = Bot(
            token=settings.telegram_bot_token.get_secret_value(),
            session=AiohttpSession(api=TelegramAPIServer.from_base(settings.telegram_api_base)),
            default=DefaultBotProperties(link_preview=LinkPreviewOptions(is_disabled=True)),
        )
        self.inbox = Inbox(settings.data_dir)
        self.bot.session.middleware(JournalUpdates(self.inbox, settings.allowed_user_ids))
        self._replays: set[asyncio.Task[Any]] = set()
        self.dispatcher = Dispatcher(
            settings=settings, agent=self.agent, repository=self.repository
        )
        self.sequencer = ChatSequencer(self.dispatcher)
        self.dispatcher.update.outer_middleware(self.sequencer)
        # Inside the sequencer: an update is marked done before the chat's next one starts,
        # and shutdown waits for that too.
        self.dispatcher.update.outer_middleware(InboxMiddleware(self.inbox))
        self.dispatcher.message.middleware(AccessMiddleware(settings.allowed_user_ids))
        self.dispatcher.include_routers(*build_routers())
        self.dispatcher.startup.register(self._on_startup)
        self.dispatcher.shutdown.register(self._on_shutdown)

    async def _on_startup(self, bot: Bot) -> None:
        try:
            await bot.delete_webhook(drop_pending_updates=False)
            await bot.set_my_commands(
                [BotCommand(command=c, description=d) for c, d in texts.COMMANDS]
            )
            replay = await self.inbox.unanswered(self.repository)
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
        # Everything imported and built so far lives as long as the process: move it out of
        # the collector's sight. aiogram, pydantic and openai leave ~10^6 long-lived objects,
        # and walking them made each full collection a 200 ms pause in the middle of answers.
        gc.collect()
        gc.freeze()
        if not self.settings.allowed_user_ids:
            log.warning("ALLOWED_USER_IDS is empty: the bot answers everyone")
        log.info(
            "membot started: model=%s data_dir=%s window=%d summary_every=%d tools=%s mode=%s",
            self.settings.openrouter_model,
            self.settings.data_dir,
            self.settings.window_size,
            self.settings.summary_every,
            ",".join(self.settings.enabled_tools) or "none",
            self.settings.tool_mode,
        )

    async def _on_shutdown(self) -> None:
        # Polling has stopped; let updates already being answered finish, then the summaries.
        await self.sequencer.wait_idle(shutdown_grace(self.settings))
        await self.inbox.flush()
        if self._replays:  # replayed updates pass through the sequencer: done by now, or stuck
            await asyncio.wait(self._replays, timeout=1.0)
        await self._release()
        log.info("membot stopped")

    async def _release(self) -> None:
        await self.agent.aclose()
        await self.model.close()
        await self.repository.close()

    async def run(self, *, handle_signals: bool = True) -> None:
        await self.dispatcher.start_polling(
            self.bot,
            handle_signals=handle_signals,
            allowed_updates=self.dispatcher.resolve_used_update_types(),
        )

    async def stop(self) -> None:
        await self.dispatcher.stop_polling()
