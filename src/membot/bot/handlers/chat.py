"""Text messages addressed to the bot: a turn (bot/turns.py), the answer rendered by its sink."""

from __future__ import annotations

from aiogram import Bot, F, Router
from aiogram.types import Message

from membot.bot.drafts import DraftPacing
from membot.bot.filters import AddressedToBot, Inline
from membot.bot.turns import run_turn, to_incoming
from membot.core.service import ConversationService


def build_router() -> Router:
    router = Router(name="chat")
    router.message.register(on_text, Inline(F.text), AddressedToBot())
    return router


async def on_text(
    message: Message, bot: Bot, service: ConversationService, streaming: DraftPacing | None
) -> None:
    incoming = await to_incoming(message, bot)
    await run_turn(
        message,
        bot,
        service,
        incoming,
        lambda sink: service.say(incoming, sink),
        streaming=streaming,
    )
