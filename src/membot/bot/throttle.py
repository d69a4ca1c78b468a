"""Pacing of what the bot sends (see bot/limits.py), as an aiogram request middleware:
every call that puts a message in a chat waits for its turn under Telegram's limits, and a
429 pauses the chat (for every process, with QUEUE=redis) and is sent again after the pause.
No answer is dropped because of a limit; it waits.

A draft (sendMessageDraft) is the exception: a preview that is worth nothing late, so it
never waits. It goes only when the bot-wide budget has room to spare (SendLimits.spare),
and is otherwise skipped (DraftSkipped, before anything is sent); a 429 on a draft is the
drafts' own business (bot/drafts.py), never sent again."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from aiogram import methods
from aiogram.client.session.middlewares.base import BaseRequestMiddleware, NextRequestMiddlewareType
from aiogram.exceptions import (
    TelegramBadRequest,
    TelegramForbiddenError,
    TelegramNotFound,
    TelegramRetryAfter,
)
from aiogram.methods.base import TelegramType

from membot.errors import Busy

if TYPE_CHECKING:
    from aiogram import Bot
    from aiogram.methods import TelegramMethod
    from aiogram.methods.base import Response

    from membot.bot.limits import SendLimits

log = logging.getLogger(__name__)

# What Telegram's flood control counts: messages that appear in a chat. Typing indicators,
# reads (getChatAdministrators, ...) and callback answers are not paced.
PACED: tuple[type[Any], ...] = (
    methods.SendMessage,
    methods.EditMessageText,
    methods.EditEphemeralMessageText,
    methods.EditMessageReplyMarkup,
    methods.EditMessageCaption,
    methods.SendPhoto,
    methods.SendDocument,
    methods.SendVoice,
    methods.SendSticker,
    methods.SendMediaGroup,
    methods.CopyMessage,
    methods.ForwardMessage,
)


# Told, when set (bot/outbox.py sets it while an answer is sent), that a message's request
# goes out now (True), or came back refused, so that Telegram does not have it (False): a
# process killed in between may have sent it, and must not send it again.
ON_WIRE: ContextVar[Callable[[bool], Awaitable[None]] | None] = ContextVar(
    "membot_on_wire", default=None
)
# Answers that say the message was not sent (a 4xx); a 5xx or a lost connection says nothing.
REFUSED = (TelegramRetryAfter, TelegramBadRequest, TelegramForbiddenError, TelegramNotFound)


class DraftSkipped(Busy):
    """A draft not sent: the bot's sending budget has no room to spare for it now."""


def paced_chat(method: object) -> int | None:
    if not isinstance(method, PACED):
        return None
    chat_id = getattr(method, "chat_id", None)
    return chat_id if isinstance(chat_id, int) else None


class Throttle(BaseRequestMiddleware):
    def __init__(self, limits: SendLimits) -> None:
        self.limits = limits

    async def __call__(
        self,
        make_request: NextRequestMiddlewareType[TelegramType],
        bot: Bot,
        method: TelegramMethod[TelegramType],
    ) -> Response[TelegramType]:
        draft_to = method.chat_id if isinstance(method, methods.SendMessageDraft) else None
        if draft_to is not None:
            if not await self.limits.spare(draft_to):
                raise DraftSkipped("no room in the sending budget for a draft")
            return await make_request(bot, method)
        chat_id = paced_chat(method)
        if chat_id is None:
            return await make_request(bot, method)
        wire = ON_WIRE.get()
        while True:
            await self.limits.acquire(chat_id)
            if wire is not None:
                await wire(True)
            try:
                return await make_request(bot, method)
            except REFUSED as exc:
                if wire is not None:
                    await wire(False)
                if not isinstance(exc, TelegramRetryAfter):
                    raise
                log.warning(
                    "Telegram flood control for chat %s: pausing it %ss, then sending again",
                    chat_id,
                    exc.retry_after,
                )
                await self.limits.pause(chat_id, exc.retry_after)
