"""The Telegram front door: the Bot, the Dispatcher and its routers, built once.

How updates reach it (polling or webhook, the file journal or the Redis stream) and which
process does what is membot.roles' business; this only answers an update it is fed (`feed`),
and says which updates are worth keeping in the journal (`worth_keeping`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import orjson
from aiogram import Bot, Dispatcher
from aiogram.client.default import DefaultBotProperties
from aiogram.client.telegram import TelegramAPIServer
from aiogram.methods import (
    DeleteWebhook,
    GetMe,
    SendChatAction,
    SendMessage,
    SetMyCommands,
)
from aiogram.methods.base import Response
from aiogram.types import BotCommand, LinkPreviewOptions, Message, Update
from pydantic import ValidationError

from membot.bot import texts
from membot.bot.drafts import TELEGRAM_PACING, DraftPacing
from membot.bot.due import TaskDoor
from membot.bot.exports import MIB, ChatExports
from membot.bot.filters import AddressedToBot
from membot.bot.guest import GuestDoor
from membot.bot.handlers import build_routers
from membot.bot.handlers.chat_settings import ChatAdmins
from membot.bot.limits import build_limits
from membot.bot.middlewares import AccessMiddleware, ChatContext
from membot.bot.session import JsonSession
from membot.bot.throttle import Throttle
from membot.bot.updates import RawUpdates
from membot.config import QueueSettings, Settings
from membot.core.timed import TaskTurns
from membot.export import Exports
from membot.intake.contract import CONTROLS
from membot.schedule.models import TASK_UPDATE, firing_of
from membot.wiring import Core

if TYPE_CHECKING:
    from membot.redis.client import Redis

log = logging.getLogger(__name__)

# aiogram parses every Bot API reply with a `Response[T]` pydantic model that it creates per
# call; pydantic caches those classes only weakly, so each garbage collection drops them and
# the next call rebuilds one (~10 ms). Holding them keeps the hot path off that cliff.
_RESPONSE_MODELS: list[type[Any]] = []
_HOT_METHODS = (RawUpdates, SendMessage, SendChatAction, GetMe, DeleteWebhook, SetMyCommands)

# The bot's commands, as a journal recognises them (never replayed, see intake/journal.py).
COMMANDS = frozenset(f"/{name}" for name, _ in texts.COMMANDS)


def pin_response_models() -> None:
    if not _RESPONSE_MODELS:
        _RESPONSE_MODELS.extend(Response[m.__returning__] for m in _HOT_METHODS)  # type: ignore[name-defined]


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _never(exc: BaseException) -> bool:
    return False


class MembotApp:
    """The Bot (its session paced by Telegram's limits), the Dispatcher, the routers.

    `passing` says which failures the error handler hands back to whoever fed the update
    (to be tried again) instead of apologising: with the Redis stream, those that pass."""

    def __init__(
        self,
        settings: Settings,
        core: Core,
        *,
        passing: Callable[[BaseException], bool] = _never,
        drafts: DraftPacing = TELEGRAM_PACING,
    ) -> None:
        pin_response_models()
        telegram, limits = settings.telegram, settings.limits
        if telegram.token is None:
            raise ValueError("TELEGRAM_BOT_TOKEN is required for the bot")
        self._allowed = limits.allowed_user_ids
        self.bot = Bot(
            token=telegram.token.get_secret_value(),
            # Requests as JSON bodies (bot/session.py); orjson for the Bot API's JSON.
            session=JsonSession(
                api=TelegramAPIServer.from_base(telegram.api_base),
                json_loads=orjson.loads,
                json_dumps=_json,
            ),
            default=DefaultBotProperties(link_preview=LinkPreviewOptions(is_disabled=True)),
        )
        # Telegram's limits on sending: shared by every process through Redis with QUEUE=redis.
        self.bot.session.middleware(Throttle(build_limits(telegram, _shared(settings.queue, core))))
        # No FSM: nothing here uses aiogram's per-user state, so no storage is kept for it.
        self.dispatcher = Dispatcher(
            disable_fsm=True,
            llm=settings.llm,
            conversation=settings.conversation,
            media=settings.media,
            service=core.service,
            repository=core.repository,
            ledger=core.ledger,
            quota=core.quota,
            admins=ChatAdmins(limits.admin_user_ids),
            # /tasks and /timezone: the chats' tasks, TASKS and TIMEZONE, the wall clock.
            task_store=core.task_store,
            task_options=settings.tasks,
            clock=core.clock,
            # /import: other assistants' exports into a chat's memory.
            importer=core.importer,
            passing=passing,
            # STREAMING: the drafts' pacing, None for one message per answer.
            streaming=drafts if telegram.streaming else None,
            # Guest Mode: a guest message answered from its caller's private chat's memory.
            guests=GuestDoor(
                self.bot,
                core.service,
                allowed=limits.allowed_user_ids,
                deadline=telegram.guest_deadline,
                clock=core.clock,
            ),
            # /export: built and sent beside the chat's turns, by Core's supervisor.
            chat_exports=ChatExports(
                Exports(
                    core.repository,
                    core.task_store,
                    settings.storage.data_dir,
                    default_zone=settings.tasks.timezone,
                    clock=core.clock,
                    watch=core.export_watch,
                ),
                core.tasks,
                telegram.export_part_mb * MIB,
            ),
        )
        # Inner, in this order: the allowlist first (an outsider's chat is never read), then
        # what the handler knows of the chat (`cid`, `state`, `words`), errors' apology too.
        access, chat = AccessMiddleware(limits.allowed_user_ids), ChatContext(core.service)
        for observer in (
            self.dispatcher.message,
            self.dispatcher.edited_message,
            self.dispatcher.callback_query,
        ):
            observer.middleware(access)
            observer.middleware(chat)
        self.dispatcher.errors.middleware(chat)
        self.dispatcher.include_routers(*build_routers())
        self._addressed = AddressedToBot()
        # Due tasks come as updates of their own (intake/due.py), answered here, not by a router.
        self.tasks = TaskDoor(
            self.bot,
            core.service,
            TaskTurns(
                core.task_store,
                core.repository,
                settings.tasks,
                allowed=limits.allowed_user_ids,
                clock=core.clock,
            ),
        )

    def allowed_updates(self) -> list[str]:
        # Telegram's Stop on a draft comes too: handled before the dispatcher, by the runner
        # (intake/runner.py), since the turn it stops holds the chat's turn.
        used = self.dispatcher.resolve_used_update_types()
        return [*used, *(kind for kind in CONTROLS if kind not in used)]

    async def set_commands(self) -> None:
        """The menu in Russian for Russian-speaking clients, English for everyone else (the
        default scope last, so the default is what a plain getMyCommands shows)."""
        for code in ("ru", ""):
            await self.bot.set_my_commands(
                [BotCommand(command=c, description=d) for c, d in texts.get(code).COMMANDS],
                language_code=code or None,
            )

    async def feed(self, data: str, *parts: str) -> None:
        """Answer one update (Telegram's JSON), or an album: its first part, with every
        part's message as `album` for the handler (one turn, one answer). A due task's
        update (intake/due.py) is its task's turn (bot/due.py). The caller holds
        the chat's turn: errors are handled inside it (the apology goes out before the
        chat's next update)."""
        if TASK_UPDATE in data and (firing := firing_of(json.loads(data))) is not None:
            await self.tasks.answer(firing)
            return
        update = Update.model_validate_json(data, context={"bot": self.bot})
        if not parts:
            await self.dispatcher.feed_update(self.bot, update)
            return
        album = [update.message] + [
            Update.model_validate_json(part, context={"bot": self.bot}).message for part in parts
        ]
        messages = tuple(m for m in album if m is not None)
        await self.dispatcher.feed_update(self.bot, update, album=messages)

    async def worth_keeping(self, update: Mapping[str, Any]) -> bool:
        """For the journal: only what would be answered again is kept, text (not commands,
        the journal checks those) or a file the bot reads from an allowed user, and in a
        group only when addressed to the bot. A refused outsider or group chatter leaves no
        trace on disk."""
        raw = update.get("message")
        if not isinstance(raw, dict):
            return False
        allowed = self._allowed
        sender = raw.get("from")
        if allowed and (not isinstance(sender, dict) or sender.get("id") not in allowed):
            return False
        chat = raw.get("chat")
        if isinstance(chat, dict) and chat.get("type") == "private":
            return True  # addressed to the bot, whatever it says (as AddressedToBot judges)
        message = Message.model_validate(raw, context={"bot": self.bot})
        return await self._addressed(message, self.bot)

    @staticmethod
    def readable(record: Mapping[str, Any]) -> bool:
        """Whether a journaled update still reads (aiogram's models may have changed)."""
        try:
            Update.model_validate(record)
        except ValidationError:
            return False
        return True

    async def close(self) -> None:
        await self.bot.session.close()


def _shared(queue: QueueSettings, core: Core) -> tuple[Redis, str] | None:
    """Telegram's limits are counted in Redis when processes answer from one stream."""
    if core.redis is None or queue.backend != "redis":
        return None
    return core.redis, core.settings.redis.prefix
