"""/tasks and /timezone: a chat's reminders and scheduled tasks, each with its Cancel button,
and the chat's time zone.

The model sets tasks (core/tools/tasks.py); here users see and cancel them. Anyone in a chat
may look; a task is cancelled by its author or an administrator (the group's, or
ADMIN_USER_IDS; in a private chat, the user). The time zone is set like /model: by the user
in a private chat, by an administrator in a group."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

from aiogram import Bot, F, Router
from aiogram.filters import Command, CommandObject
from aiogram.filters.callback_data import CallbackData
from aiogram.types import CallbackQuery, InlineKeyboardMarkup, Message
from aiogram.utils.formatting import Text
from aiogram.utils.keyboard import InlineKeyboardBuilder

from membot.bot import texts
from membot.bot.filters import Inline
from membot.bot.handlers.chat_settings import ChatAdmins
from membot.bot.personal import answer_personal, edit_personal
from membot.bot.times import repeat_words, time_node, with_time
from membot.clock import Clock
from membot.config import TaskSettings
from membot.core.service import ConversationService
from membot.ids import ConversationId
from membot.memory.contract.state import ConversationState
from membot.schedule.models import InvalidTaskId, Task, check_task_id
from membot.schedule.rules import BadSchedule, zone_named
from membot.schedule.show import chat_zone
from membot.schedule.store import TaskStore

log = logging.getLogger(__name__)

# One message holds the list: at most this many tasks, each text cut to this many characters
# (a message is at most 4,096; an inline keyboard at most 100 buttons).
SHOWN = 20
SHOWN_TEXT = 150
ALERT_TEXT = 150  # a callback answer is at most 200 characters


class TaskCancel(CallbackData, prefix="task"):
    """A task's Cancel button under /tasks."""

    id: str


def build_router() -> Router:
    router = Router(name="tasks")
    router.message.register(tasks, Command("tasks"))
    router.callback_query.register(cancel_pressed, TaskCancel.filter(), Inline(F.message))
    router.message.register(timezone, Command("timezone"))
    return router


def cut(text: str, size: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= size else flat[: size - 1].rstrip() + "…"


def task_list(
    words: texts.Texts, found: Sequence[Task], zone: ZoneInfo, *, group: bool
) -> tuple[Text, InlineKeyboardMarkup | None]:
    """The list /tasks shows (soonest first) and its Cancel buttons, numbered alike."""
    if not found:
        return Text(words.NO_TASKS), None
    nodes: list[object] = [words.TASKS_HEADER.format(count=len(found))]
    keyboard = InlineKeyboardBuilder()
    for n, task in enumerate(found[:SHOWN], 1):
        nodes += [f"\n\n{n}. {cut(task.text, SHOWN_TEXT)}\n", time_node(task.due, zone)]
        nodes.append(f" · {repeat_words(words, task.repeat)}")
        if group and task.name:
            nodes.append(" · " + words.TASK_SET_BY.format(name=task.name))
        keyboard.button(
            text=words.TASK_CANCEL_BUTTON.format(n=n), callback_data=TaskCancel(id=task.id)
        )
    if len(found) > SHOWN:
        nodes.append("\n\n" + words.TASKS_MORE.format(more=len(found) - SHOWN))
    keyboard.adjust(4)
    return Text(*nodes), keyboard.as_markup()


async def tasks(
    message: Message,
    bot: Bot,
    cid: ConversationId,
    state: ConversationState,
    words: texts.Texts,
    task_store: TaskStore,
    task_options: TaskSettings,
) -> None:
    zone = chat_zone(state.timezone, task_options.timezone)
    found = await task_store.tasks(cid.chat_id)
    content, keyboard = task_list(words, found, zone, group=message.chat.type != "private")
    # In a group, to the member who asked (bot/personal.py).
    await answer_personal(bot, message, words, content, markup=keyboard)


async def cancel_pressed(
    query: CallbackQuery,
    callback_data: TaskCancel,
    bot: Bot,
    cid: ConversationId,
    state: ConversationState,
    words: texts.Texts,
    task_store: TaskStore,
    task_options: TaskSettings,
    admins: ChatAdmins,
) -> None:
    message = query.message
    if not isinstance(message, Message):  # too old for the bot to see or edit
        await query.answer()
        return
    try:
        task_id = check_task_id(callback_data.id)
    except InvalidTaskId:  # not a button of ours
        await query.answer()
        return
    chat = cid.chat_id
    task = await task_store.get(chat, task_id)
    if task is None:
        await query.answer(words.TASK_GONE)
    else:
        presser = query.from_user.id
        if presser != task.author and not await admins.may_change(bot, message.chat, presser):
            await query.answer(words.TASK_NOT_YOURS, show_alert=True)
            return
        await task_store.remove(chat, task_id)
        log.info("chat %s: task %s cancelled by user %s", chat, task_id, presser)
        await query.answer(words.TASK_CANCELLED.format(text=cut(task.text, ALERT_TEXT)))
    zone = chat_zone(state.timezone, task_options.timezone)
    found = await task_store.tasks(chat)
    content, keyboard = task_list(words, found, zone, group=message.chat.type != "private")
    # Cosmetic: an unchanged list is "message is not modified" to Telegram (False).
    await edit_personal(bot, message, content, keyboard, presser=query.from_user.id)


async def timezone(
    message: Message,
    command: CommandObject,
    bot: Bot,
    cid: ConversationId,
    state: ConversationState,
    words: texts.Texts,
    service: ConversationService,
    admins: ChatAdmins,
    task_options: TaskSettings,
    clock: Clock,
) -> None:
    asked = (command.args or "").strip()
    now: datetime = clock()
    if not asked:
        zone = chat_zone(state.timezone, task_options.timezone)
        shown = with_time(words.TIMEZONE_IS, now, zone, zone=zone.key)
        await message.answer(**shown.as_kwargs())
        return
    user = message.from_user
    if not await admins.may_change(bot, message.chat, user.id if user else None):
        await message.answer(words.ADMINS_ONLY)
        return
    try:
        zone = zone_named(asked)
    except BadSchedule:
        # One line: what was typed (cut short, on one line) and what would do.
        await message.answer(words.TIMEZONE_BAD.format(zone=cut(asked, 64)))
        return
    await service.set_timezone(cid, zone.key)
    await message.answer(**with_time(words.TIMEZONE_SET, now, zone, zone=zone.key).as_kwargs())
