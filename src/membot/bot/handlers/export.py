"""/export, and the Export button under /memory (callback data MEMORY_EXPORT): the chat's
whole memory sent as ZIP documents (bot/exports.py, membot.export). In a private chat the
user exports; in a group a chat administrator or ADMIN_USER_IDS (the allowlist is checked
before, by the middleware)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiogram import Bot, F, Router
from aiogram.filters import Command
from aiogram.types import CallbackQuery, Message

from membot.bot import texts
from membot.bot.exports import ChatExports
from membot.bot.filters import Inline
from membot.bot.handlers.chat_settings import ChatAdmins
from membot.bot.handlers.memory import MEMORY_EXPORT
from membot.bot.render import topic_of
from membot.ids import ConversationId


def build_router() -> Router:
    router = Router(name="export")
    router.message.register(export, Command("export"))
    router.callback_query.register(export_pressed, Inline(F.data == MEMORY_EXPORT))
    return router


async def export(
    message: Message,
    bot: Bot,
    cid: ConversationId,
    words: texts.Texts,
    admins: ChatAdmins,
    chat_exports: ChatExports,
) -> None:
    user = message.from_user
    if not await admins.may_change(bot, message.chat, user.id if user else None):
        await message.answer(words.EXPORT_ADMINS_ONLY)
        return
    await _begin(bot, cid, words, chat_exports, message, message.answer)


async def export_pressed(
    query: CallbackQuery,
    bot: Bot,
    cid: ConversationId,
    words: texts.Texts,
    admins: ChatAdmins,
    chat_exports: ChatExports,
) -> None:
    message = await admins.pressed(bot, query, words.EXPORT_ADMINS_ONLY)
    if message is None:
        return
    await _begin(bot, cid, words, chat_exports, message, query.answer)


async def _begin(
    bot: Bot,
    cid: ConversationId,
    words: texts.Texts,
    chat_exports: ChatExports,
    message: Message,
    reply: Callable[[str], Awaitable[object]],
) -> None:
    """One export of the chat at a time: `reply` says it runs already, or that it began
    (a message for /export, the button's answer for a press)."""
    if chat_exports.running(cid):
        await reply(words.EXPORT_RUNNING)
        return
    cut = await chat_exports.cut(cid)
    await reply(words.EXPORT_STARTED)
    chat_exports.start(bot, cut, topic_of(message), words)
