"""/memory: what the bot keeps of a chat, to see and correct. The kept facts, each with a
Delete button, then the current summary; under the last message Forget… and Export (their
handlers are /forget's and /export's: callback data MEMORY_FORGET and MEMORY_EXPORT).

In a group it is shown to the member who asked only (bot/personal.py; never posted to the
group). The facts are the group's, so only its administrators (and ADMIN_USER_IDS) delete
them: only they get Delete buttons, and a press is checked again. In a private chat, the user.

A Delete button names its fact by its place in the list and a short hash of its text: a
fact that moved up (one before it was deleted) is still found by its hash; one that is gone
or was changed meanwhile is not deleted, and the presser is told. After a Delete the message
is edited to show the facts it still lists.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence

from aiogram import Bot, F, Router
from aiogram.filters import Command
from aiogram.filters.callback_data import CallbackData
from aiogram.types import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message
from aiogram.utils.keyboard import InlineKeyboardBuilder

from membot.bot import texts
from membot.bot.citations import utf16_len
from membot.bot.filters import Inline
from membot.bot.handlers.chat_settings import ChatAdmins
from membot.bot.handlers.commands import consultation_note
from membot.bot.handlers.tasks import cut
from membot.bot.personal import Piece, answer_personal, edit_personal, pieces
from membot.bot.render import TELEGRAM_LIMIT
from membot.core.service import ConversationService
from membot.ids import ConversationId
from membot.memory.contract.repository import ChatRepository
from membot.memory.contract.state import ConversationState

log = logging.getLogger(__name__)

# Pressed under /memory; registered by /forget's and /export's handlers.
MEMORY_FORGET = "memory:forget"
MEMORY_EXPORT = "memory:export"
# Telegram's limits: 100 buttons under a message; room is left for the text around a listing.
BUTTONS = 90
ROOM = TELEGRAM_LIMIT - 200
ALERT_TEXT = 150  # a callback answer is at most 200 characters


class FactDelete(CallbackData, prefix="fact"):
    """A fact's Delete button: its index in the list and `fact_hash` of its text."""

    n: int
    h: str


def fact_hash(fact: str) -> str:
    return hashlib.sha256(fact.encode()).hexdigest()[:8]


def build_router() -> Router:
    router = Router(name="memory")
    router.message.register(memory, Command("memory"))
    router.callback_query.register(delete_pressed, FactDelete.filter(), Inline(F.message))
    return router


def find(facts: Sequence[str], pressed: FactDelete) -> str | None:
    """The fact a Delete button names, where it is now; None when it is no longer kept."""
    if 0 <= pressed.n < len(facts) and fact_hash(facts[pressed.n]) == pressed.h:
        return facts[pressed.n]
    return next((f for f in facts if fact_hash(f) == pressed.h), None)


def fact_messages(
    words: texts.Texts, facts: Sequence[str], shown: Sequence[int], deletable: bool
) -> list[Piece]:
    """The facts at the indexes `shown` (numbered by their place among `facts`), as few
    messages as fit Telegram's limits, each with the Delete buttons of its facts."""
    groups: list[list[int]] = [[]]
    size = 0
    for index in shown:
        line = utf16_len(f"{index + 1}. {facts[index]}\n")
        if groups[-1] and (size + line > ROOM or len(groups[-1]) >= BUTTONS):
            groups.append([])
            size = 0
        groups[-1].append(index)
        size += line
    made = []
    for group in groups:
        listing = "\n".join(f"{i + 1}. {facts[i]}" for i in group)
        keyboard = InlineKeyboardBuilder()
        for i in group if deletable else ():
            label = words.FACT_DELETE_BUTTON.format(n=i + 1)
            keyboard.button(text=label, callback_data=FactDelete(n=i, h=fact_hash(facts[i])))
        keyboard.adjust(5)
        markup = keyboard.as_markup() if deletable and group else None
        made.append(Piece(words.FACTS.format(facts=listing), markup=markup))
    return made


def with_memory_buttons(
    words: texts.Texts, markup: InlineKeyboardMarkup | None
) -> InlineKeyboardMarkup:
    rows = list(markup.inline_keyboard) if markup is not None else []
    rows.append(
        [
            InlineKeyboardButton(text=words.MEMORY_FORGET_BUTTON, callback_data=MEMORY_FORGET),
            InlineKeyboardButton(text=words.MEMORY_EXPORT_BUTTON, callback_data=MEMORY_EXPORT),
        ]
    )
    return InlineKeyboardMarkup(inline_keyboard=rows)


def memory_view(
    words: texts.Texts, facts: Sequence[str], summary: str, *, deletable: bool, note: str = ""
) -> list[Piece]:
    """/memory's messages: the facts (or that there are none), the summary if there is
    one, `note` (a consultation going on) last, Forget… and Export under the last."""
    shown = fact_messages(words, facts, range(len(facts)), deletable) if facts else []
    shown = shown or [Piece(words.NO_FACTS)]
    if summary.strip():
        shown += pieces(words.SUMMARY.format(summary=summary.strip()))
    last = shown[-1]
    text = last.text + note if utf16_len(last.text + note) <= TELEGRAM_LIMIT else last.text
    shown[-1] = Piece(text, last.entities, with_memory_buttons(words, last.markup))
    return shown


async def memory(
    message: Message,
    bot: Bot,
    cid: ConversationId,
    state: ConversationState,
    words: texts.Texts,
    repository: ChatRepository,
    admins: ChatAdmins,
) -> None:
    facts = await repository.get_facts(cid)
    summary = await repository.get_summary(cid)
    user = message.from_user
    deletable = await admins.may_change(bot, message.chat, user.id if user else None)
    view = memory_view(
        words, facts, summary, deletable=deletable, note=consultation_note(words, state)
    )
    # Never to the whole group: the facts may be personal (bot/personal.py).
    await answer_personal(bot, message, words, view, secret=True)


async def delete_pressed(
    query: CallbackQuery,
    callback_data: FactDelete,
    bot: Bot,
    cid: ConversationId,
    words: texts.Texts,
    repository: ChatRepository,
    admins: ChatAdmins,
    service: ConversationService,
) -> None:
    message = await admins.pressed(bot, query, words.ADMINS_ONLY)
    if message is None:
        return
    facts = await repository.get_facts(cid)
    fact = find(facts, callback_data)
    removed = await repository.remove_facts(cid, [fact]) if fact is not None else []
    if not removed:
        await query.answer(words.FACT_CHANGED, show_alert=True)
    else:
        log.info("chat %s: a fact deleted by user %s", cid.chat_id, query.from_user.id)
        # The summary may say it too: rewritten in the background to agree, as after the
        # model's `forget` (core/agent.py), so the fact is in no later prompt at all.
        agent = service.agent
        agent.tasks.spawn(("summary", cid), agent.summarizer.maybe_summarize(cid, removed))
        await query.answer(words.FACT_DELETED.format(fact=cut(removed[0], ALERT_TEXT)))
    text, markup = shown_after(words, message, await repository.get_facts(cid))
    await edit_personal(bot, message, text, markup, presser=query.from_user.id)


def shown_after(
    words: texts.Texts, message: Message, facts: Sequence[str]
) -> tuple[str, InlineKeyboardMarkup | None]:
    """The text and buttons of a /memory message once facts changed: the facts it listed
    (known by its Delete buttons) that are still kept, numbered as they are now."""
    listed: set[str] = set()
    memory_buttons = False
    for row in message.reply_markup.inline_keyboard if message.reply_markup else []:
        for button in row:
            data = button.callback_data or ""
            memory_buttons = memory_buttons or data == MEMORY_FORGET
            if data.startswith(f"{FactDelete.__prefix__}:"):
                listed.add(FactDelete.unpack(data).h)
    shown = [i for i, f in enumerate(facts) if fact_hash(f) in listed]
    if shown:
        first = fact_messages(words, facts, shown, deletable=True)[0]
        text, markup = first.text, first.markup
    else:
        text, markup = (words.FACTS_ALL_DELETED if facts else words.NO_FACTS), None
    return text, with_memory_buttons(words, markup) if memory_buttons else markup
