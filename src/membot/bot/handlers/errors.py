"""The last line of defence: an unexpected error is logged, the user hears a short apology."""

from __future__ import annotations

import contextlib
import logging

from aiogram import Router
from aiogram.exceptions import TelegramAPIError
from aiogram.types import ErrorEvent

from membot.bot import texts

log = logging.getLogger(__name__)


def build_router() -> Router:
    router = Router(name="errors")

    @router.error()
    async def on_error(event: ErrorEvent) -> None:
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
            # The chat may be unreachable (blocked bot, network); then there is nobody to tell.
            with contextlib.suppress(TelegramAPIError, OSError):
                await message.answer(texts.INTERNAL_ERROR)

    return router
