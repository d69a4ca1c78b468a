"""/consult, /finish, /cancel: consultations in Telegram. The dialog itself is the core's; what
the bot says of it is in the chat's language."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.filters import Command, CommandObject
from aiogram.types import Message

from membot.bot import texts
from membot.bot.drafts import DraftPacing
from membot.bot.turns import run_turn, to_incoming
from membot.config import ConversationSettings
from membot.core.service import ConversationService
from membot.ids import ConversationId
from membot.memory.contract.state import ConversationState


def build_router() -> Router:
    router = Router(name="consult")
    router.message.register(consult, Command("consult"))
    router.message.register(finish, Command("finish"))
    router.message.register(cancel, Command("cancel"))
    return router


async def consult(
    message: Message,
    command: CommandObject,
    bot: Bot,
    state: ConversationState,
    words: texts.Texts,
    service: ConversationService,
    conversation: ConversationSettings,
    streaming: DraftPacing | None,
) -> None:
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
        await message.answer(words.CONSULT_BAD_ROUNDS.format(max_rounds=conversation.max_rounds))
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


async def finish(
    message: Message,
    bot: Bot,
    state: ConversationState,
    words: texts.Texts,
    service: ConversationService,
    streaming: DraftPacing | None,
) -> None:
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


async def cancel(
    message: Message, cid: ConversationId, words: texts.Texts, service: ConversationService
) -> None:
    # `words` were read with the state cancel starts from (the chat's turn is held): the
    # language the consultation was in.
    before = await service.cancel(cid)
    if before is None:
        await message.answer(words.NOT_CONSULTING)
        return
    await message.answer(
        words.CONSULT_CANCELLED.format(round=before.round + 1, max_rounds=before.max_rounds)
    )


def parse_consult(args: str | None) -> tuple[int | None, str]:
    """`/consult [N] <request>`: the rounds asked for (None: the default) and the request."""
    words = (args or "").strip().split(maxsplit=1)
    if words and words[0].lstrip("+-").isdigit():
        return int(words[0]), words[1].strip() if len(words) > 1 else ""
    return None, (args or "").strip()
