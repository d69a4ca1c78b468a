"""/export's work beside the chat: the cut is taken in the chat's turn (quick reads), the ZIP
is built and uploaded afterwards as a background task of the process (Core's supervisor:
awaited, or cancelled after its grace, at shutdown), so the chat's next turns do not wait for
it. One export per chat at a time; its temporary files are removed however it ends. A
/forget of the chat while it is built or sent stops it (export/watch.py): it is made again
from a new cut, so what was erased is in no export sent after the press (a part Telegram
had taken whole before stays in the chat, as the messages do)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging

from aiogram import Bot
from aiogram.types import FSInputFile

from membot.bot import texts
from membot.export import Cut, Export, Exports, Stale, part_names
from membot.ids import ConversationId
from membot.tasks import TaskSupervisor

log = logging.getLogger(__name__)

MIB = 1024 * 1024
# Seconds one part's upload may take: 45 MiB over a slow uplink.
UPLOAD_TIMEOUT = 900
# Builds of one /export: the first, and again after each /forget that stopped one.
ATTEMPTS = 3


class ChatExports:
    def __init__(self, exports: Exports, supervisor: TaskSupervisor, part_size: int) -> None:
        self.exports = exports
        self.supervisor = supervisor
        self.part_size = part_size
        self._running: set[ConversationId] = set()

    def running(self, cid: ConversationId) -> bool:
        return cid in self._running

    async def cut(self, cid: ConversationId) -> Cut:
        return await self.exports.cut(cid)

    def start(self, bot: Bot, cut: Cut, thread: int | None, words: texts.Texts) -> None:
        """Build and send the cut's export in the background."""
        self._running.add(cut.cid)
        job = self._send(bot, cut, thread, words)
        if not self.supervisor.spawn(("export", cut.cid), job):  # shutting down
            self._running.discard(cut.cid)

    async def _send(self, bot: Bot, cut: Cut, thread: int | None, words: texts.Texts) -> None:
        chat = cut.cid.chat_id
        try:
            for attempt in range(1, ATTEMPTS + 1):
                try:
                    async with self.exports.build(cut, self.part_size) as built:
                        await self._upload(bot, built, thread, words)
                    break
                except Stale:
                    if attempt == ATTEMPTS:
                        raise
                    log.info("%s: the chat was forgotten from; its export is made again", cut.cid)
                    cut = await self.exports.cut(cut.cid)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("%s: the export failed: %s", cut.cid, type(exc).__name__)
            log.debug("the export failed", exc_info=True)
            with contextlib.suppress(Exception):
                await bot.send_message(chat, words.EXPORT_FAILED, message_thread_id=thread)
        finally:
            self._running.discard(cut.cid)

    async def _upload(
        self, bot: Bot, built: Export, thread: int | None, words: texts.Texts
    ) -> None:
        cut, count = built.cut, len(built.parts)
        names = part_names(cut, count)
        date = cut.taken.astimezone(cut.zone).strftime("%Y-%m-%d %H:%M")
        caption = words.EXPORT_CAPTION.format(date=date, messages=built.messages, files=built.files)
        for n, (path, name) in enumerate(zip(built.parts, names, strict=True), 1):
            part = words.EXPORT_PART.format(part=n, parts=count) if count > 1 else ""
            await built.send(
                functools.partial(
                    bot.send_document,
                    cut.cid.chat_id,
                    FSInputFile(path, filename=name),
                    caption=caption + part,
                    message_thread_id=thread,
                    request_timeout=UPLOAD_TIMEOUT,
                )
            )
