"""Stickers, photos, voice and everything else that is not text."""

from __future__ import annotations

from aiogram import Router
from aiogram.types import Message

from membot.bot import texts
from membot.bot.filters import AddressedToBot


def build_router() -> Router:
    router = Router(name="other")

    @router.message(AddressedToBot())
    async def not_text(message: Message) -> None:
        await message.answer(texts.TEXT_ONLY)

    return router
