"""/start, /help, /summary, /memory, /reset."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.filters import Command, CommandStart
from aiogram.types import Message

from membot.bot import texts
from membot.bot.render import send_markdown, send_plain, topic_of
from membot.config import Settings
from membot.core.service import ConversationService
from membot.ids import ConversationId
from membot.memory.base import ChatRepository


async def consultation_note(service: ConversationService, message: Message) -> str:
    """For a command sent in the middle of a consultation: that it goes on, and where."""
    state = await service.state(ConversationId.telegram(message.chat.id))
    if not state.consulting:
        return ""
    return "\n\n" + texts.CONSULT_GOES_ON.format(round=state.round + 1, max_rounds=state.max_rounds)


def build_router() -> Router:
    router = Router(name="commands")

    @router.message(CommandStart())
    async def start(message: Message, service: ConversationService) -> None:
        await message.answer(texts.START + await consultation_note(service, message))

    @router.message(Command("help"))
    async def help_(message: Message, service: ConversationService, settings: Settings) -> None:
        text = texts.HELP.format(rounds=settings.consult_rounds, max_rounds=settings.max_rounds)
        await message.answer(text + await consultation_note(service, message))

    @router.message(Command("reset"))
    async def reset(message: Message, service: ConversationService) -> None:
        before = await service.reset(ConversationId.telegram(message.chat.id))
        ended = " " + texts.CONSULT_ENDED_BY_RESET if before.consulting else ""
        await message.answer(texts.RESET_DONE + ended)

    @router.message(Command("summary"))
    async def summary(
        message: Message,
        bot: Bot,
        repository: ChatRepository,
        service: ConversationService,
        settings: Settings,
    ) -> None:
        note = await consultation_note(service, message)
        text = await repository.get_summary(ConversationId.telegram(message.chat.id))
        if not text:
            await message.answer(texts.NO_SUMMARY.format(every=settings.summary_every) + note)
            return
        await send_markdown(
            bot,
            message.chat.id,
            texts.SUMMARY.format(summary=text) + note,
            thread_id=topic_of(message),
        )

    @router.message(Command("memory"))
    async def memory(
        message: Message, bot: Bot, repository: ChatRepository, service: ConversationService
    ) -> None:
        note = await consultation_note(service, message)
        facts = await repository.get_facts(ConversationId.telegram(message.chat.id))
        if not facts:
            await message.answer(texts.NO_FACTS + note)
            return
        listing = "\n".join(f"{n}. {fact}" for n, fact in enumerate(facts, 1))
        # Up to 100 facts of 500 characters: this can run past one message.
        await send_plain(
            bot,
            message.chat.id,
            texts.FACTS.format(facts=listing) + note,
            thread_id=topic_of(message),
        )

    return router
