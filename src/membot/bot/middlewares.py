"""Update pipeline pieces: one chat at a time, and who may talk to the bot."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiogram import BaseMiddleware, Router
from aiogram.dispatcher.middlewares.error import ErrorsMiddleware
from aiogram.types import CallbackQuery, Chat, Message, TelegramObject

from membot.core.service import ConversationService
from membot.ids import ConversationId

log = logging.getLogger(__name__)

Handler = Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]]

NOT_ALLOWED = "Sorry, this bot is private."


class ChatSequencer(BaseMiddleware):
    """Outer update middleware: the updates of one chat run strictly one after another.

    aiogram runs every update as its own task, in arrival order. Each task takes its chat's
    turn from the conversation service (`ordered`) before its first real await, and the
    service queues first-in first-out, so a chat's updates are handled in the order Telegram
    sent them, while different chats run concurrently. The service also counts them in
    flight, so shutdown waits for them as for HTTP requests.

    Errors are handled inside the lock, by aiogram's own ErrorsMiddleware over `router` (the
    dispatcher): the apology for a failed update goes out before the chat's next update is
    answered, and shutdown waits for it too. (The dispatcher's outer ErrorsMiddleware wraps
    this one, so it would only see the error once the lock was released.)
    """

    def __init__(self, router: Router, service: ConversationService) -> None:
        self._errors = ErrorsMiddleware(router)
        self._service = service

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        chat: Chat | None = data.get("event_chat")
        cid = ConversationId.telegram(chat.id) if chat is not None else None
        async with self._service.ordered(cid):
            return await self._errors(handler, event, data)


class AccessMiddleware(BaseMiddleware):
    """Inner message and callback query middleware (runs once a handler matched): the allowlist.

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
                await event.answer(NOT_ALLOWED, show_alert=True)
                return None
            return await handler(event, data)
        if not isinstance(event, Message):
            return await handler(event, data)
        user = event.from_user
        if user is None or user.id not in self.allowed:
            log.info("refused user %s in chat %s", user.id if user else None, event.chat.id)
            await event.answer(NOT_ALLOWED)
            return None
        return await handler(event, data)
