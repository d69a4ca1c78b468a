"""/import: a ChatGPT or Claude export brought into the chat's memory (core/importer.py).

The export comes as a document with the caption /import, or as the next document of the user
who sent /import alone, within IMPORT_WAIT (kept in the chat's state, so a restart keeps
waiting). In groups only the chat's administrators import. The order: the allowlist
(AccessMiddleware), the administrators, the budgets and rate limit, the size Telegram
declares against IMPORT_MAX_MB, and only then the download (into a temporary directory,
removed after) and the import. Whatever stops it is one line, and nothing is imported.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

from aiogram import Bot, F, Router
from aiogram.filters import Command
from aiogram.types import Message
from aiogram.utils.chat_action import ChatActionSender

from membot.bot import texts
from membot.bot.awaited import AwaitedExport
from membot.bot.files import download_to
from membot.bot.filters import Inline
from membot.bot.handlers.chat_settings import ChatAdmins
from membot.bot.refusals import over_limit
from membot.bot.turns import to_incoming
from membot.clock import Clock, iso
from membot.config.groups import MediaSettings
from membot.core.importer import Importer, ImportReport, TooManyToImport
from membot.core.service import ConversationService
from membot.ids import ConversationId
from membot.imports import BrokenExport, ExportTooBig, NotAnExport
from membot.media.errors import TELEGRAM_DOWNLOAD_LIMIT, FileTooBig
from membot.memory.contract.state import ConversationState
from membot.usage import OverLimit, Quota

log = logging.getLogger(__name__)

# How long after /import alone the user's next document is taken as the export.
IMPORT_WAIT = timedelta(minutes=10)
MB = 1024 * 1024


def build_router() -> Router:
    router = Router(name="imports")
    router.message.register(on_import_file, Inline(F.document), Command("import"))
    router.message.register(on_import, Command("import"))
    router.message.register(on_import_file, Inline(F.document), AwaitedExport())
    return router


async def on_import(
    message: Message,
    bot: Bot,
    service: ConversationService,
    admins: ChatAdmins,
    cid: ConversationId,
    words: texts.Texts,
    clock: Clock,
) -> None:
    user_id = message.from_user.id if message.from_user else None
    if not await admins.may_change(bot, message.chat, user_id):
        await message.answer(words.IMPORT_ADMINS_ONLY)
        return
    await service.await_import(cid, user_id, iso(clock() + IMPORT_WAIT))
    await message.answer(words.IMPORT_SEND.format(minutes=int(IMPORT_WAIT.total_seconds() // 60)))


async def on_import_file(
    message: Message,
    bot: Bot,
    service: ConversationService,
    importer: Importer,
    admins: ChatAdmins,
    media: MediaSettings,
    quota: Quota | None,
    cid: ConversationId,
    state: ConversationState,
    words: texts.Texts,
) -> None:
    user_id = message.from_user.id if message.from_user else None
    if not await admins.may_change(bot, message.chat, user_id):
        await message.answer(words.IMPORT_ADMINS_ONLY)
        return
    if state.import_by is not None:  # awaited no longer, whatever comes of this one
        await service.await_import(cid, None, None)
    try:
        await service.admit(await to_incoming(message, bot, text=""))
    except OverLimit as refused:
        await message.answer(over_limit(words, refused, quota))
        return
    limit = media.import_max_mb * MB
    document = message.document
    assert document is not None  # the filters' F.document
    if document.file_size is not None and document.file_size > limit:
        await message.answer(words.IMPORT_TOO_BIG.format(limit_mb=media.import_max_mb))
        return
    async with ChatActionSender.typing(bot=bot, chat_id=message.chat.id):
        reply = await _import(bot, importer, cid, document.file_id, limit, words)
    await message.answer(reply)


async def _import(
    bot: Bot, importer: Importer, cid: ConversationId, file_id: str, limit: int, w: texts.Texts
) -> str:
    folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="membot-import-"))
    try:
        path = folder / "export"
        await download_to(bot, file_id, path)
        report = await importer.run(cid, path, limit)
    except FileTooBig:
        return w.IMPORT_TOO_BIG.format(limit_mb=min(limit, TELEGRAM_DOWNLOAD_LIMIT) // MB)
    except ExportTooBig:
        return w.IMPORT_TOO_BIG.format(limit_mb=limit // MB)
    except NotAnExport as exc:
        log.info("%s: import refused: %s", cid, exc)
        return w.IMPORT_NOT_EXPORT
    except BrokenExport as exc:
        log.info("%s: import refused: %s", cid, exc)
        return w.IMPORT_BROKEN
    except TooManyToImport as exc:
        return w.IMPORT_TOO_MANY.format(count=exc.count, limit=exc.limit)
    finally:
        await asyncio.to_thread(shutil.rmtree, folder, True)
    return _done(w, report)


def _done(w: texts.Texts, report: ImportReport) -> str:
    if not report.messages or report.first is None or report.last is None:
        return w.IMPORT_NOTHING_NEW
    return w.IMPORT_DONE.format(
        conversations=report.conversations,
        messages=report.messages,
        first=report.first.date().isoformat(),
        last=report.last.date().isoformat(),
    )
