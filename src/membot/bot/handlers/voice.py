"""Voice messages, audio files and round video notes: transcribed by the turn, the
transcript quoted above the answer (bot/sinks.py TelegramSink). In groups only one that
replies to one of the bot's messages (a voice cannot mention the bot; AddressedToBot)."""

from __future__ import annotations

from aiogram import Bot, F, Router
from aiogram.types import Message

from membot.bot.drafts import DraftPacing
from membot.bot.filters import AddressedToBot, Inline
from membot.bot.turns import answer_files
from membot.config.groups import MediaSettings
from membot.core.service import ConversationService


def build_router() -> Router:
    router = Router(name="voice")
    router.message.register(on_voice, Inline(F.voice | F.audio | F.video_note), AddressedToBot())
    return router


async def on_voice(
    message: Message,
    bot: Bot,
    service: ConversationService,
    media: MediaSettings,
    streaming: DraftPacing | None,
) -> None:
    await answer_files(message, bot, service, media, streaming=streaming)
