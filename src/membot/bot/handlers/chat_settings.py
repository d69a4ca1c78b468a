"""/model, /persona, /search and /usage: a chat's own model and system prompt, whether the
model may search the web there, and what was spent.

In private chats the user may change their chat's model, persona and search; in groups only
the chat's administrators (asked from Telegram, cached for a minute) and ADMIN_USER_IDS may.
"""

from __future__ import annotations

import contextlib
import time
from decimal import Decimal

from aiogram import Bot, F, Router
from aiogram.exceptions import TelegramBadRequest
from aiogram.filters import Command, CommandObject
from aiogram.filters.callback_data import CallbackData
from aiogram.types import CallbackQuery, Chat, Message
from aiogram.utils.keyboard import InlineKeyboardBuilder

from membot.bot import texts
from membot.bot.filters import Inline
from membot.bot.personal import answer_personal
from membot.config import LlmSettings
from membot.core.service import ConversationService
from membot.ids import ConversationId
from membot.memory.contract.state import MAX_PERSONA, ConversationState
from membot.usage import Quota, UsageLedger
from membot.usage.ledger import Totals, day_key, month_key

ADMINS_TTL = 60.0  # seconds a group's administrators are trusted without asking again


class ModelChoice(CallbackData, prefix="model"):
    """A /model button: the index into MODEL choices (ids may be longer than the 64 bytes
    Telegram allows in callback data)."""

    index: int


class ChatAdmins:
    """Who may change a chat's settings. Telegram's answer is cached per chat briefly, so a
    burst of /model presses asks once."""

    def __init__(self, owners: frozenset[int], ttl: float = ADMINS_TTL) -> None:
        self.owners = owners
        self.ttl = ttl
        self._cache: dict[int, tuple[float, frozenset[int]]] = {}

    async def may_change(self, bot: Bot, chat: Chat, user_id: int | None) -> bool:
        if user_id is None:
            return False
        if chat.type == "private" or user_id in self.owners:
            return True
        now = time.monotonic()
        cached = self._cache.get(chat.id)
        if cached is None or now - cached[0] > self.ttl:
            members = await bot.get_chat_administrators(chat.id)
            cached = (now, frozenset(m.user.id for m in members))
            self._cache[chat.id] = cached
        return user_id in cached[1]

    async def pressed(self, bot: Bot, query: CallbackQuery, refusal: str) -> Message | None:
        """The message under a button one who may change the chat pressed; None once the
        press is answered: silently for a message too old for the bot to see or edit, with
        `refusal` as an alert for anyone else."""
        message = query.message
        if not isinstance(message, Message):
            await query.answer()
            return None
        if not await self.may_change(bot, message.chat, query.from_user.id):
            await query.answer(refusal, show_alert=True)
            return None
        return message


def model_keyboard(
    words: texts.Texts, choices: tuple[str, ...], current: str
) -> InlineKeyboardBuilder:
    keyboard = InlineKeyboardBuilder()
    for index, choice in enumerate(choices):
        label = words.MODEL_CHOSEN.format(model=choice) if choice == current else choice
        keyboard.button(text=label, callback_data=ModelChoice(index=index))
    keyboard.adjust(1)
    return keyboard


def cost_text(value: Decimal) -> str:
    """A cost as a person reads it: no exponent, no trailing zeros, at least 0."""
    text = format(value.normalize(), "f")
    return text if text != "-0" else "0"


def usage_line(words: texts.Texts, totals: Totals) -> str:
    if not totals.calls:
        return words.USAGE_NONE
    # A call the provider gave no price for is not a call that cost nothing.
    if totals.unpriced >= totals.calls:
        cost = words.USAGE_COST_UNKNOWN
    elif totals.unpriced:
        cost = words.USAGE_COST_PARTIAL.format(
            cost=cost_text(totals.cost), unpriced=totals.unpriced
        )
    else:
        cost = cost_text(totals.cost)
    return words.USAGE_LINE.format(
        tokens=totals.tokens,
        prompt=totals.prompt_tokens,
        completion=totals.completion_tokens,
        cached=totals.cached_percent,
        cost=cost,
    )


def build_router() -> Router:
    router = Router(name="chat_settings")
    router.message.register(model, Command("model"))
    router.callback_query.register(model_pressed, ModelChoice.filter(), Inline(F.message))
    router.message.register(persona, Command("persona"))
    router.message.register(search, Command("search"))
    router.message.register(usage, Command("usage"))
    return router


async def model(
    message: Message,
    command: CommandObject,
    bot: Bot,
    cid: ConversationId,
    state: ConversationState,
    words: texts.Texts,
    service: ConversationService,
    llm: LlmSettings,
    admins: ChatAdmins,
) -> None:
    current = own_model(state.model, llm)
    asked = (command.args or "").strip()
    if not asked and len(llm.model_choices) < 2:  # nothing to choose from: no button
        await message.answer(words.MODEL_ONLY.format(model=current))
        return
    if not asked:
        keyboard = model_keyboard(words, llm.model_choices, current)
        await message.answer(
            words.MODEL_IS.format(model=current), reply_markup=keyboard.as_markup()
        )
        return
    user = message.from_user
    if not await admins.may_change(bot, message.chat, user.id if user else None):
        await message.answer(words.ADMINS_ONLY)
        return
    if asked not in llm.model_choices:
        choices = ", ".join(llm.model_choices)
        await message.answer(words.MODEL_UNKNOWN.format(model=asked[:100], choices=choices))
        return
    await _set_model(service, cid, asked, llm)
    await message.answer(words.MODEL_SET.format(model=asked))


async def model_pressed(
    query: CallbackQuery,
    callback_data: ModelChoice,
    bot: Bot,
    cid: ConversationId,
    words: texts.Texts,
    service: ConversationService,
    llm: LlmSettings,
    admins: ChatAdmins,
) -> None:
    message = await admins.pressed(bot, query, words.ADMINS_ONLY)
    if message is None:
        return
    choices = llm.model_choices
    if not 0 <= callback_data.index < len(choices):  # a button from an older MODELS
        await query.answer(words.MODEL_GONE.format(choices=", ".join(choices)))
        return
    chosen = choices[callback_data.index]
    await _set_model(service, cid, chosen, llm)
    done = words.MODEL_SET.format(model=chosen)
    await query.answer(done)
    # Cosmetic: the same button pressed twice is "message is not modified" to Telegram.
    with contextlib.suppress(TelegramBadRequest):
        keyboard = model_keyboard(words, choices, chosen)
        await message.edit_text(done, reply_markup=keyboard.as_markup())


async def persona(
    message: Message,
    command: CommandObject,
    bot: Bot,
    cid: ConversationId,
    state: ConversationState,
    words: texts.Texts,
    service: ConversationService,
    admins: ChatAdmins,
) -> None:
    asked = (command.args or "").strip()
    if not asked:
        if state.persona is None:
            await message.answer(words.PERSONA_DEFAULT)
        else:
            await message.answer(words.PERSONA_IS.format(persona=state.persona))
        return
    user = message.from_user
    if not await admins.may_change(bot, message.chat, user.id if user else None):
        await message.answer(words.ADMINS_ONLY)
        return
    if asked.lower() == "reset":
        await service.set_persona(cid, None)
        await message.answer(words.PERSONA_RESET)
        return
    if len(asked) > MAX_PERSONA:
        await message.answer(words.PERSONA_TOO_LONG.format(limit=MAX_PERSONA, length=len(asked)))
        return
    await service.set_persona(cid, asked)
    await message.answer(words.PERSONA_SET.format(length=len(asked)))


async def search(
    message: Message,
    command: CommandObject,
    bot: Bot,
    cid: ConversationId,
    state: ConversationState,
    words: texts.Texts,
    service: ConversationService,
    llm: LlmSettings,
    admins: ChatAdmins,
) -> None:
    asked = (command.args or "").strip().lower()
    if not asked:
        if not llm.web_search:
            await message.answer(words.SEARCH_BY_OPERATOR)
        else:
            await message.answer(words.SEARCH_OFF if state.search_off else words.SEARCH_ON)
        return
    if asked not in ("on", "off"):
        await message.answer(words.SEARCH_USAGE)
        return
    user = message.from_user
    if not await admins.may_change(bot, message.chat, user.id if user else None):
        await message.answer(words.ADMINS_ONLY)
        return
    # The chat's choice is kept either way: it applies once the operator allows search.
    await service.set_search(cid, asked == "on")
    if asked == "on":
        await message.answer(words.SEARCH_SET_ON if llm.web_search else words.SEARCH_BY_OPERATOR)
    else:
        await message.answer(words.SEARCH_SET_OFF)


async def usage(
    message: Message,
    bot: Bot,
    cid: ConversationId,
    words: texts.Texts,
    ledger: UsageLedger,
    quota: Quota,
) -> None:
    """The asker's usage (and in a group the chat's): to them alone (bot/personal.py)."""
    now = quota.clock()  # the clock the budgets count in
    day, month = day_key(now), month_key(now)
    lines = []
    if message.from_user is not None:
        uid = str(message.from_user.id)
        lines.append(
            words.USAGE_YOURS.format(
                day=usage_line(words, await ledger.totals("user", uid, day)),
                month=usage_line(words, await ledger.totals("user", uid, month)),
            )
        )
    if message.chat.type != "private":
        lines.append(
            words.USAGE_CHAT.format(
                day=usage_line(words, await ledger.totals("chat", str(cid), day)),
                month=usage_line(words, await ledger.totals("chat", str(cid), month)),
            )
        )
    await answer_personal(bot, message, words, "\n\n".join(lines))


def own_model(stored: str | None, llm: LlmSettings) -> str:
    """The model a chat uses: its own while MODELS still offers it, else the default."""
    return stored if stored in llm.model_choices else llm.default_model


async def _set_model(
    service: ConversationService, cid: ConversationId, model: str, llm: LlmSettings
) -> None:
    # The default is stored as "none of its own": a later change of OPENROUTER_MODEL applies.
    own = None if model == llm.default_model else model
    await service.set_model(cid, own)
