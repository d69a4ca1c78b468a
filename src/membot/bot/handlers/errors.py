"""The last line of defence: an unexpected error is logged, the user hears a short apology.

A failure that passes (`passing`: with the Redis stream, those that pass) matches no handler
here, so aiogram raises it again to whoever fed the update, to be tried again: the stream
keeps it, and it is answered once the server is back, with no apology."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from aiogram import Router
from aiogram.exceptions import TelegramAPIError
from aiogram.types import ErrorEvent

from membot.bot import texts

log = logging.getLogger(__name__)


def build_router() -> Router:
    router = Router(name="errors")
    router.errors.register(on_error, not_passing)
    return router


async def not_passing(event: ErrorEvent, passing: Callable[[BaseException], bool]) -> bool:
    return not passing(event.exception)


async def on_error(event: ErrorEvent, words: texts.Texts = texts.EN) -> None:
    """`words`: the chat's, or English if its state could not be read, or the update has
    no chat (ChatContext)."""
    message = event.update.message
    log.error(
        "update %s (chat %s) failed: %s",
        event.update.update_id,
        message.chat.id if message else None,
        type(event.exception).__name__,
        # A traceback's frames and message may quote what the user wrote: DEBUG only.
        exc_info=event.exception if log.isEnabledFor(logging.DEBUG) else None,
    )
    if message is not None:
        # The chat may be unreachable (blocked bot, network); then there is nobody to tell.
        with contextlib.suppress(TelegramAPIError, OSError):
            await message.answer(words.INTERNAL_ERROR)
