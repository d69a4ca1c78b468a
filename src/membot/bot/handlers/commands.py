"""/start, /help, /summary, /memory, /reset."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.filters import Command, CommandStart
from aiogram.types import Message

from membot.agent import Agent
from membot.bot import texts
from membot.bot.render import send_markdown, send_plain, topic_of
from membot.config import Settings


def build_router() -> Router:
    router = Router(name="commands")

    @router.message(CommandStart())
    async def start(message: Message) -> None:
        await message.answer(texts.START)

    @router.message(Command("help"))
    async def help_(message: Message) -> None:
        await message.answer(texts.HELP)

    @router.message(Command("reset"))
    async def reset(message: Message, agent: Agent) -> None:
        await agent.reset(message.chat.id)
        await message.answer(texts.RESET_DONE)

    @router.message(Command("summary"))
    async def summary(message: Message, bot: Bot, agent: Agent, settings: Settings) -> None:
        text = await agent.summary(message.chat.id)
        if not text:
            await message.answer(texts.NO_SUMMARY.format(every=settings.summary_every))
            return
        await send_markdown(
            bot, message.chat.id, texts.SUMMARY.format(summary=text), thread_id=topic_of(message)
        )

    @router.message(Command("memory"))
    async def memory(message: Message, bot: Bot, agent: Agent) -> None:
        facts = await agent.facts(message.chat.id)
        if not facts:
            await message.answer(texts.NO_FACTS)
            return
        listing = "\n".join(f"{n}. {fact}" for n, fact in enumerate(facts, 1))
        # Up to 100 facts of 500 characters: this can run past one message.
        await send_plain(
            bot, message.chat.id, texts.FACTS.format(facts=listing), thread_id=topic_of(message)
        )

    return router
