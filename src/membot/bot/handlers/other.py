"""Stickers, videos, locations and everything else the bot does not read (text, voice,
photos and documents have routers of their own, tried first)."""

from __future__ import annotations

from aiogram import F, Router
from aiogram.enums import ContentType
from aiogram.types import Message

from membot.bot import texts
from membot.bot.filters import AddressedToBot, Inline

# What a person sends. Service messages (a pin, a new chat photo, an auto-delete timer...)
# are not addressed to anyone and get no answer.
USER_CONTENT = frozenset(
    {
        ContentType.ANIMATION,
        ContentType.CONTACT,
        ContentType.DICE,
        ContentType.LOCATION,
        ContentType.PAID_MEDIA,
        ContentType.POLL,
        ContentType.STICKER,
        ContentType.STORY,
        ContentType.VENUE,
        ContentType.VIDEO,
    }
)


def build_router() -> Router:
    router = Router(name="other")
    router.message.register(not_text, Inline(F.content_type.in_(USER_CONTENT)), AddressedToBot())
    return router


async def not_text(message: Message, words: texts.Texts) -> None:
    await message.answer(words.TEXT_ONLY)
