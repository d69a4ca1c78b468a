"""Stickers, videos, locations and everything else the bot does not read (text, voice,
photos and documents have routers of their own, tried first)."""

from __future__ import annotations

from aiogram import F, Router
from aiogram.enums import ContentType
from aiogram.types import Message

from membot.bot.filters import AddressedToBot, Inline
from membot.bot.handlers.chat import texts_for
from membot.core.service import ConversationService

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

    @router.message(Inline(F.content_type.in_(USER_CONTENT)), AddressedToBot())
    async def not_text(message: Message, service: ConversationService) -> None:
        await message.answer((await texts_for(service, message)).TEXT_ONLY)

    return router
