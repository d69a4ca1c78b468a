"""Photos and documents, alone or as an album. A photo (or an image sent as a file) is shown
to the chat's model if it sees images and kept with the conversation; a document (a PDF with
a text layer, a text file, code) is read, kept and searchable. An album arrives as one update
per part; the intake's runner gathers them and feeds the first with every part as `album`
(MembotApp.feed): one turn, one answer. In groups, when addressed as text is: a caption
mentioning the bot, or a reply to it."""

from __future__ import annotations

from aiogram import Bot, F, Router
from aiogram.types import Message

from membot.bot.drafts import DraftPacing
from membot.bot.filters import AddressedToBot, Inline
from membot.bot.turns import answer_files
from membot.config.groups import MediaSettings
from membot.core.service import ConversationService


def build_router() -> Router:
    router = Router(name="files")
    router.message.register(on_file, Inline(F.photo | F.document), AddressedToBot())
    return router


async def on_file(
    message: Message,
    bot: Bot,
    service: ConversationService,
    media: MediaSettings,
    streaming: DraftPacing | None,
    album: tuple[Message, ...] = (),
) -> None:
    await answer_files(message, bot, service, media, album, streaming=streaming)
