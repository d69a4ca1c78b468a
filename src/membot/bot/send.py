"""One message sent as formatted, with Telegram's refusals of the formatting taken back.

Every message the bot writes carries its formatting as entities (never a parse mode). Where
Telegram refuses a reply's quote (not in the replied message as Telegram has it), the reply
goes without it; where it refuses the formatting, the same text goes plain: the words
arrive either way. Flood control (429) is waited out by bot/throttle.py.
"""

from __future__ import annotations

import logging
from typing import Any

from aiogram import Bot
from aiogram.exceptions import TelegramBadRequest
from aiogram.types import (
    EphemeralMessageParameters,
    InlineKeyboardMarkup,
    Message,
    MessageEntity,
    ReplyParameters,
)

log = logging.getLogger(__name__)


async def send_text(
    bot: Bot,
    chat_id: int,
    text: str,
    entities: list[dict[str, Any]],
    *,
    thread_id: int | None = None,
    reply: ReplyParameters | None = None,
    markup: InlineKeyboardMarkup | None = None,
    ephemeral: EphemeralMessageParameters | None = None,
) -> Message:
    """Send `text` with `entities` (UTF-16 offsets, as render.Part), else without the
    reply's quote, else plain; any other refusal is raised. An ephemeral message's refusal
    (400) is raised at once: the caller sends it another way (bot/personal.py)."""
    formatted = [MessageEntity(**e) for e in entities] or None
    # Ends: a send succeeds, or raises; each fallback happens at most once (then the quote
    # or the entities are None).
    while True:
        try:
            return await bot.send_message(
                chat_id,
                text,
                message_thread_id=thread_id,
                entities=formatted,
                reply_markup=markup,
                reply_parameters=reply,
                ephemeral_message_parameters=ephemeral,
                parse_mode=None,
            )
        except TelegramBadRequest as exc:
            refusal = exc.message.lower()
            if reply and reply.quote and ("quote" in refusal or not formatted):
                log.warning("chat %s: Telegram refused a reply's quote (%s)", chat_id, exc.message)
                reply = reply.model_copy(update={"quote": None})
                continue
            if formatted is None or (ephemeral is not None and "entit" not in refusal):
                raise
            log.warning(
                "chat %s: Telegram rejected formatting (%s); resending as plain text",
                chat_id,
                exc.message,
            )
            formatted = None
