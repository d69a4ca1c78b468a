"""A request to forget (core/forget.py) as the chat sees it: what was found, each message with
its date, and two buttons, pressed only by the one who asked (bot/handlers/forget.py). Both
/forget and the model's forget_messages show it; the model's once its answer is sent."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from aiogram import Bot
from aiogram.filters.callback_data import CallbackData
from aiogram.types import InlineKeyboardMarkup, Message
from aiogram.utils.formatting import Text
from aiogram.utils.keyboard import InlineKeyboardBuilder

from membot.bot import texts
from membot.bot.personal import Route, answer_personal
from membot.bot.texts import forget as forget_texts
from membot.bot.texts.forget import ForgetTexts
from membot.bot.times import time_node
from membot.core.forget import Forgetting, Request
from membot.core.service import ConversationService
from membot.ids import ConversationId
from membot.memory.contract.state import ConversationState
from membot.schedule.show import chat_zone

# One message holds the list: at most this many messages, each cut to this many characters.
SHOWN = 10
SHOWN_TEXT = 120


class ForgetConfirm(CallbackData, prefix="forget"):
    """The confirmation's buttons: the request's token, and erase or keep."""

    token: str
    yes: bool


def cut(text: str, size: int = SHOWN_TEXT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= size else flat[: size - 1].rstrip() + "…"


def confirmation(
    words: ForgetTexts, request: Request, zone: ZoneInfo
) -> tuple[Text, InlineKeyboardMarkup]:
    """The list of what the request found, oldest first, and its two buttons."""
    found = request.found
    nodes: list[object] = [words.FOUND.format(messages=len(found.seqs), facts=len(found.facts))]
    for message in found.shown[:SHOWN]:
        who = (message.name or words.YOU) if message.role == "user" else words.BOT
        shown = message.content or " ".join(a.name or a.kind for a in message.attachments)
        nodes += ["\n\n", time_node(message.ts, zone), f" · {who}: {cut(shown)}"]
    if len(found.shown) > SHOWN:
        nodes.append("\n\n" + words.MORE.format(more=len(found.shown) - SHOWN))
    nodes += [f"\n• {cut(fact)}" for fact in found.facts[:SHOWN]]
    for task in found.tasks[:SHOWN]:
        nodes += ["\n• ", words.TASK, " ", time_node(task.due, zone), f": {cut(task.text)}"]
    if found.summary:
        nodes.append("\n• " + words.IN_SUMMARY)
    keyboard = InlineKeyboardBuilder()
    keyboard.button(
        text=words.BUTTON_YES, callback_data=ForgetConfirm(token=request.token, yes=True)
    )
    keyboard.button(
        text=words.BUTTON_NO, callback_data=ForgetConfirm(token=request.token, yes=False)
    )
    return Text(*nodes), keyboard.as_markup()


async def show(
    bot: Bot,
    message: Message,
    forgetting: Forgetting,
    request: Request,
    state: ConversationState,
    zone: str = "",
) -> None:
    """Ask the one who asked to confirm: in a group, to them alone (bot/personal.py), in
    the chat's words; dates on the chat's clock (its /timezone, else `zone`, else UTC)
    where an app shows the text as it is."""
    words = forget_texts.get(state.language)
    content, keyboard = confirmation(words, request, chat_zone(state.timezone, zone))
    sent: list[Message] = []
    route = await answer_personal(
        bot, message, texts.get(state.language), content, markup=keyboard, sent=sent
    )
    if route is Route.PRIVATE and request.user_id is not None:
        # The list, which quotes the words, is taken back with the buttons' answer.
        forgetting.shown_at(request.token, [(m.chat.id, m.message_id) for m in sent])
        # The private copy has no buttons (they act where they are pressed): these do, for
        # the group's request, pressed by the one who asked.
        await bot.send_message(request.user_id, words.CONFIRM_HERE, reply_markup=keyboard)


async def show_model_request(
    bot: Bot, message: Message, service: ConversationService, cid: ConversationId
) -> None:
    """After a turn: the request the model's forget_messages made in it, if any."""
    request = service.agent.forgetting.asked_by_model(cid)
    if request is not None:
        forgetting = service.agent.forgetting
        await show(bot, message, forgetting, request, await service.state(cid))
