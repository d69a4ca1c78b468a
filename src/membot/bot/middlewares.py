"""Who may talk to the bot, and what a handler knows of the chat it answers. (One chat at a
time is the intake runner's: it holds the chat's turn while the dispatcher answers,
intake/runner.py.)"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiogram import BaseMiddleware
from aiogram.dispatcher.event.handler import HandlerObject
from aiogram.types import CallbackQuery, Chat, ErrorEvent, Message, TelegramObject, User

from membot.bot import texts
from membot.core.service import ConversationService
from membot.ids import ConversationId

log = logging.getLogger(__name__)

Handler = Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]]


def refusal(user: User | None) -> str:
    """The refusal in the user's Telegram app's language (an "en-US" is "en"): the bot knows
    no chat of theirs to take one from."""
    code = user.language_code if user is not None else None
    return texts.get((code or "").split("-")[0].lower()).NOT_ALLOWED


class AccessMiddleware(BaseMiddleware):
    """Inner message, edited message and callback query middleware (runs once a handler
    matched): the allowlist.

    Being inner, it never answers group chatter that was not addressed to the bot.
    """

    def __init__(self, allowed_user_ids: frozenset[int]) -> None:
        self.allowed = allowed_user_ids

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        if not self.allowed:
            return await handler(event, data)
        if isinstance(event, CallbackQuery):  # a button of the bot's (/model's) pressed
            if event.from_user.id not in self.allowed:
                log.info("refused user %s pressing a button", event.from_user.id)
                await event.answer(refusal(event.from_user), show_alert=True)
                return None
            return await handler(event, data)
        if not isinstance(event, Message):
            return await handler(event, data)
        user = event.from_user
        if user is None or user.id not in self.allowed:
            log.info("refused user %s in chat %s", user.id if user else None, event.chat.id)
            await event.answer(refusal(user))
            return None
        return await handler(event, data)


class ChatContext(BaseMiddleware):
    """Inner middleware (after the allowlist, once a handler matched): what a handler knows
    of its chat, as keyword arguments. `cid`, the chat's conversation; and, read once for
    the handlers whose signature names them, `state` (its ConversationState) and `words`
    (the bot's words in its language). A handler that names neither, like a text's, costs
    no storage read here: the turn reads the state itself.

    On the errors observer the apology's words come from here too; if the state cannot be
    read (the storage may be what failed) they are English."""

    def __init__(self, service: ConversationService) -> None:
        self.service = service

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        chat: Chat | None = data.get("event_chat")  # aiogram's UserContextMiddleware's
        if chat is None:
            return await handler(event, data)
        cid = data["cid"] = ConversationId.telegram(chat.id)
        wanted: HandlerObject | None = data.get("handler")
        if wanted is None or not {"state", "words"} & wanted.params:
            return await handler(event, data)
        try:
            state = await self.service.state(cid)
        except Exception as exc:
            if not isinstance(event, ErrorEvent):
                raise
            log.debug("chat %s: no language for the apology: %s", chat.id, type(exc).__name__)
            data["words"] = texts.EN
            return await handler(event, data)
        data["state"], data["words"] = state, texts.get(state.language)
        return await handler(event, data)
