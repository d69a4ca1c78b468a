"""The last line of defence: an unexpected error is logged, the user hears a short apology."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from aiogram import Router
from aiogram.exceptions import TelegramAPIError
from aiogram.types import ErrorEvent

from membot.bot import texts
from membot.core.service import ConversationService
from membot.ids import ConversationId

log = logging.getLogger(__name__)


def build_router() -> Router:
    router = Router(name="errors")

    @router.error()
    async def on_error(
        event: ErrorEvent,
        service: ConversationService,
        passing: Callable[[BaseException], bool],
    ) -> None:
        if passing(event.exception):
            # A failure that passes, and whoever fed the update tries it again (the Redis
            # stream keeps it): no apology, it is answered once the server is back.
            raise event.exception
        message = event.update.message
        chat = message.chat.id if message else None
        log.error(
            "update %s (chat %s) failed: %s",
            event.update.update_id,
            chat,
            type(event.exception).__name__,
            # A traceback's frames and message may quote what the user wrote: DEBUG only.
            exc_info=event.exception if log.isEnabledFor(logging.DEBUG) else None,
        )
        if message is not None:
            words = await _texts_of(service, message.chat.id)
            # The chat may be unreachable (blocked bot, network); then there is nobody to tell.
            with contextlib.suppress(TelegramAPIError, OSError):
                await message.answer(words.INTERNAL_ERROR)

    return router


async def _texts_of(service: ConversationService, chat_id: int) -> texts.Texts:
    """The chat's words for the apology; English if its state cannot be read (the storage
    may be what failed)."""
    try:
        state = await service.state(ConversationId.telegram(chat_id))
    except Exception as exc:
        log.debug("chat %s: no language for the apology: %s", chat_id, type(exc).__name__)
        return texts.EN
    return texts.get(state.language)
