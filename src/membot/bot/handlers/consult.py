"""/consult, /finish, /cancel: consultations in Telegram. The dialog itself is the core's; what
the bot says of it is in the chat's language."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.filters import Command, CommandObject
from aiogram.types import Message

from membot.bot import texts
from membot.bot.handlers.chat import chat_state, run_turn, to_incoming
from membot.config import ConversationSettings
from membot.core.service import ConversationService
from membot.ids import ConversationId


def parse_consult(args: str | None) -> tuple[int | None, str]:
    """`/consult [N] <request>`: the rounds asked for (None: the default) and the request."""
    words = (args or "").strip().split(maxsplit=1)
    if words and words[0].lstrip("+-").isdigit():
        return int(words[0]), words[1].strip() if len(words) > 1 else ""
    return None, (args or "").strip()


def build_router() -> Router:
    router = Router(name="consult")

    @router.message(Command("consult"))
    async def consult(
        message: Message,
        command: CommandObject,
        bot: Bot,
        service: ConversationService,
        conversation: ConversationSettings,
        streaming: bool,
    ) -> None:
        state = await chat_state(service, message)
        words = texts.get(state.language)
        if state.consulting:
            await message.answer(
                words.CONSULT_IN_PROGRESS.format(round=state.round + 1, max_rounds=state.max_rounds)
            )
            return
        rounds, request = parse_consult(command.args)
        if not request:
            await message.answer(words.CONSULT_USAGE.format(rounds=conversation.consult_rounds))
            return
        if rounds is not None and not 1 <= rounds <= conversation.max_rounds:
            await message.answer(
                words.CONSULT_BAD_ROUNDS.format(max_rounds=conversation.max_rounds)
            )
            return
        incoming = await to_incoming(message, bot, text=request)
        await run_turn(
            message,
            bot,
            service,
            incoming,
            lambda sink: service.consult(incoming, rounds, sink),
            streaming=streaming,
        )

    @router.message(Command("finish"))
    async def finish(
        message: Message, bot: Bot, service: ConversationService, streaming: bool
    ) -> None:
        state = await chat_state(service, message)
        words = texts.get(state.language)
        if not state.consulting:
            await message.answer(words.NOT_CONSULTING)
            return
        # Stored as the user's message: in the language the rest of the dialog is in.
        incoming = await to_incoming(message, bot, text=words.FINISH_REQUEST)
        await run_turn(
            message,
            bot,
            service,
            incoming,
            lambda sink: service.finish(incoming, sink),
            streaming=streaming,
        )

    @router.message(Command("cancel"))
    async def cancel(message: Message, service: ConversationService) -> None:
        before = await service.cancel(ConversationId.telegram(message.chat.id))
        if before is None:
            words = texts.get((await chat_state(service, message)).language)
            await message.answer(words.NOT_CONSULTING)
            return
        words = texts.get(before.language)
        await message.answer(
            words.CONSULT_CANCELLED.format(round=before.round + 1, max_rounds=before.max_rounds)
        )

    return router
