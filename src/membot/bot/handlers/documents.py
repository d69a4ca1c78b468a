"""Documents: PDFs with a text layer, text files, code; an image sent as a file is shown
like a photo. Their text is read, kept and searchable (the turn's work); an album of
documents is one turn like an album of photos. In groups, when addressed as text is."""

from __future__ import annotations

from aiogram import Bot, F, Router
from aiogram.types import Message

from membot.bot.filters import AddressedToBot, Inline
from membot.bot.handlers.media import answer_files
from membot.config.groups import MediaSettings
from membot.core.service import ConversationService


def build_router() -> Router:
    router = Router(name="documents")

    @router.message(Inline(F.document), AddressedToBot())
    async def on_document(
        message: Message,
        bot: Bot,
        service: ConversationService,
        media: MediaSettings,
        album: tuple[Message, ...] = (),
    ) -> None:
        await answer_files(message, bot, service, media, album)

    return router
