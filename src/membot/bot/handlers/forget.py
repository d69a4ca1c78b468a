"""/forget <words>: find every message of the chat holding the words, show them, and erase
them for good once the one who asked presses the button (core/forget.py does the work).

In a private chat the user forgets anything of the chat. In a group an administrator (the
group's, or ADMIN_USER_IDS) forgets anyone's messages; another member only their own and the
bot's turns answering them. In a group what /forget answers is the member's alone
(bot/personal.py: an ephemeral message, else a private one), and its buttons answer only the
one who asked. The /memory screen's "Forget…" button (callback data `memory:forget`) says how."""

from __future__ import annotations

import contextlib
import logging

from aiogram import Bot, F, Router
from aiogram.exceptions import TelegramBadRequest
from aiogram.filters import Command, CommandObject
from aiogram.types import CallbackQuery, Message

from membot.bot import texts
from membot.bot.filters import Inline
from membot.bot.forgetting import ForgetConfirm, show
from membot.bot.handlers.chat_settings import ChatAdmins
from membot.bot.handlers.memory import MEMORY_FORGET
from membot.bot.personal import answer_personal, edit_personal
from membot.bot.texts import forget as forget_texts
from membot.config import TaskSettings
from membot.core.forget_words import MIN_CHARS, enough
from membot.core.service import ConversationService
from membot.ids import ConversationId
from membot.memory.contract.repository import StorageUnavailable
from membot.memory.contract.state import ConversationState

log = logging.getLogger(__name__)


def build_router() -> Router:
    router = Router(name="forget")
    router.message.register(forget, Command("forget"))
    router.callback_query.register(pressed, ForgetConfirm.filter(), Inline(F.message))
    router.callback_query.register(how, F.data == MEMORY_FORGET)
    return router


async def forget(
    message: Message,
    command: CommandObject,
    bot: Bot,
    cid: ConversationId,
    state: ConversationState,
    service: ConversationService,
    admins: ChatAdmins,
    task_options: TaskSettings,
) -> None:
    words = forget_texts.get(state.language)
    asked = (command.args or "").strip()
    user = message.from_user

    async def tell(text: str) -> None:  # in a group, to the member alone
        await answer_personal(bot, message, texts.get(state.language), text)

    if not asked or user is None:
        await tell(words.USAGE)
        return
    if not enough(asked):
        await tell(words.TOO_SHORT.format(chars=MIN_CHARS))
        return
    member = not await admins.may_change(bot, message.chat, user.id)
    forgetting = service.agent.forgetting
    try:
        found = await forgetting.find(cid, asked, user.id if member else None)
    except StorageUnavailable:
        await tell(words.UNAVAILABLE)
        return
    if found.empty:
        await tell(words.NONE)
        return
    request = forgetting.ask(cid, asked, found, user.id, member=member)
    await show(bot, message, forgetting, request, state, task_options.timezone)


async def pressed(
    query: CallbackQuery,
    callback_data: ForgetConfirm,
    bot: Bot,
    cid: ConversationId,
    state: ConversationState,
    service: ConversationService,
) -> None:
    words = forget_texts.get(state.language)
    message = query.message
    forgetting = service.agent.forgetting
    request = forgetting.pending(callback_data.token)
    if request is None or not isinstance(message, Message):
        await query.answer(words.EXPIRED, show_alert=True)
        return
    if query.from_user.id != request.user_id:
        await query.answer(words.NOT_YOURS, show_alert=True)
        return
    if not callback_data.yes:
        forgetting.drop(request.token)
        done = words.CANCELLED
    else:
        try:
            # Pressed in the group's chat (its turn is held), or privately where the group
            # took no ephemeral message: then the group's turn is taken here.
            async with contextlib.AsyncExitStack() as stack:
                if request.cid != cid:
                    await stack.enter_async_context(service.ordered(request.cid))
                forgotten = await forgetting.confirm(request)
        except StorageUnavailable:
            await _answer(query, words.UNAVAILABLE)
            return
        log.info(
            "%s: user %s had %d message(s) forgotten",
            request.cid,
            request.user_id,
            forgotten.messages,
        )
        done = words.DONE.format(messages=forgotten.messages, facts=forgotten.facts)
        if forgotten.summary:
            done += "\n\n" + words.DONE_SUMMARY
        if forgotten.tasks:
            done += "\n\n" + words.DONE_TASKS.format(tasks=forgotten.tasks)
    await _answer(query)
    # The list goes with the buttons: it quoted what was to be forgotten.
    await edit_personal(bot, message, done)
    for chat, shown in request.shown:  # sent apart, privately, for a group's request
        try:
            await bot.delete_message(chat, shown)
        except TelegramBadRequest as exc:  # too old to delete: emptied instead
            log.debug("the list not deleted: %s", exc.message)
            with contextlib.suppress(TelegramBadRequest):
                await bot.edit_message_text(done, chat_id=chat, message_id=shown)


async def _answer(query: CallbackQuery, alert: str | None = None) -> None:
    """Answer the press, if Telegram still takes it: it does for about 15 s, and erasing a
    long chat (its index built again) may take longer; what was done is shown all the same."""
    try:
        await query.answer(alert, show_alert=alert is not None)
    except TelegramBadRequest as exc:
        log.debug("a press answered too late: %s", exc.message)


async def how(query: CallbackQuery, state: ConversationState) -> None:
    words = forget_texts.get(state.language)
    await query.answer()
    if isinstance(query.message, Message):
        await query.message.answer(words.HOW)
