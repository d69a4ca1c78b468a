"""Text messages: hand them to the agent, render what it says."""

from __future__ import annotations

import logging

from aiogram import Bot, F, Router
from aiogram.types import Message
from aiogram.utils.chat_action import ChatActionSender

from membot.agent import Agent, Incoming
from membot.bot import texts
from membot.bot.filters import AddressedToBot, strip_mention
from membot.bot.render import send_markdown, topic_of
from membot.llm.errors import LLMError, LLMRateLimited

log = logging.getLogger(__name__)


class TelegramSink:
    """The agent's ReplySink for one Telegram message: Markdown in, rendered parts out."""

    def __init__(self, bot: Bot, message: Message) -> None:
        self.bot = bot
        self.message = message

    async def send(self, text: str) -> None:
        group = self.message.chat.type != "private"
        await send_markdown(
            self.bot,
            self.message.chat.id,
            text,
            reply_to=self.message.message_id if group else None,
            thread_id=topic_of(self.message),
        )


def build_router() -> Router:
    router = Router(name="chat")

    @router.message(F.text, AddressedToBot())
    async def on_text(message: Message, bot: Bot, agent: Agent) -> None:
        incoming = await to_incoming(message, bot)
        try:
            async with ChatActionSender.typing(
                bot=bot, chat_id=message.chat.id, message_thread_id=topic_of(message)
            ):
                await agent.respond(incoming, TelegramSink(bot, message))
        except LLMError as exc:
            log.error("chat %s: no answer: %s: %s", message.chat.id, type(exc).__name__, exc)
            await message.answer(
                texts.LLM_BUSY if isinstance(exc, LLMRateLimited) else texts.LLM_FAILED
            )

    return router


async def to_incoming(message: Message, bot: Bot) -> Incoming:
    group = message.chat.type != "private"
    text = message.text or ""
    if group:
        text = strip_mention(text, (await bot.me()).username)
    user = message.from_user
    return Incoming(
        chat_id=message.chat.id,
        text=text,
        user_id=user.id if user else None,
        name=user.full_name if user else None,
        message_id=message.message_id,
        group=group,
    )
