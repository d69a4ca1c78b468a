"""Stored answers reach their chat once, in order, even across a crash
(memory/contract/delivery.py).

A turn stores its answer with how it is sent (`Delivery`), then `deliver` sends it and marks
it delivered; each message of a long answer is recorded as Telegram accepts it, so an answer
cut short by a crash is resumed after its last accepted message, not sent whole again. If
the chat has older answers left unsent (a send that failed, a process that died), they go
first. `Redelivery` does the same at start-up for every chat with a mark, without waiting
for the chat's next message and without asking the model again: each chat inside its turn
(core/service.py `ordered`, across processes with Redis), the mark read again there, so one
process alone sends an answer. A send Telegram refuses for good (the user blocked the bot,
the chat is gone) is logged and given up; any other failure is tried again later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from aiogram import Bot
from aiogram.exceptions import (
    TelegramBadRequest,
    TelegramForbiddenError,
    TelegramMigrateToChat,
    TelegramNotFound,
)

from membot.bot.citations import cited_list
from membot.bot.render import render, send_parts
from membot.bot.throttle import ON_WIRE
from membot.core.service import ConversationService
from membot.ids import TELEGRAM, ConversationId
from membot.memory.contract.citation import Citation
from membot.memory.contract.delivery import Delivery, DeliveryMark
from membot.memory.contract.models import Message, Source
from membot.memory.contract.repository import ChatRepository
from membot.tasks import stopped

log = logging.getLogger(__name__)

# Sends that fail the same way however often they are tried: the answer is given up.
FOR_GOOD = (TelegramForbiddenError, TelegramBadRequest, TelegramNotFound, TelegramMigrateToChat)
RETRY_FIRST = 5.0  # seconds before start-up's sending is tried again after a failure
RETRY_MAX = 300.0
CHATS_AT_ONCE = 4  # chats whose answers start-up sends at the same time


class Outbox:
    """Sends a chat's stored answers and keeps their delivery marks."""

    def __init__(self, bot: Bot, repository: ChatRepository) -> None:
        self.bot = bot
        self.repository = repository

    async def deliver(
        self,
        cid: ConversationId,
        content: str,
        delivery: Delivery,
        *,
        first_seq: int,
        seq: int,
        sources: Sequence[Source] = (),
        citations: Sequence[Citation] = (),
    ) -> None:
        """A turn's answer, just stored at `seq` (its turn from `first_seq`) with its
        `sources` and `citations`: older unsent answers of the chat first. Raises what
        Telegram raised (the turn's failure, which the user is told of if they can be): a
        refusal for good once the answer is given up, anything else with it left to send
        again."""
        if first_seq > 1:
            await self._earlier(cid, before=first_seq)
        await self._send(cid, seq, content, delivery, (sources, citations), sent=0, live=True)

    async def flush(self, cid: ConversationId) -> None:
        """Every answer of the chat not marked delivered, in order (the caller holds the
        chat's turn). Raises on a failure that may pass, with the rest left to send."""
        mark = await self.repository.delivery_mark(cid)
        if mark is None:
            return
        last = mark.after
        for message in await self._pending(cid, mark.after, None):
            await self._send_stored(cid, message, mark)
            last = message.seq
        # Nothing left after the last one: the mark goes (stored lines without an answer,
        # a mark whose archive expired, included).
        async for message in self.repository.iter_messages(cid, last):
            last = message.seq
        await self._mark(cid, last)

    async def _earlier(self, cid: ConversationId, *, before: int) -> None:
        try:
            mark = await self.repository.delivery_mark(cid)
        except Exception as exc:  # the storage cannot say (it is down): this answer goes
            log.debug("chat %s: older answers not checked (%s)", cid.key, type(exc).__name__)
            return
        if mark is None or mark.after >= before - 1:
            return
        for message in await self._pending(cid, mark.after, before):
            await self._send_stored(cid, message, mark)

    async def _pending(self, cid: ConversationId, after: int, before: int | None) -> list[Message]:
        found = []
        async for message in self.repository.iter_messages(cid, after):
            if before is not None and message.seq >= before:
                break
            if message.role == "assistant" and message.delivery is not None:
                found.append(message)
        return found

    async def _send_stored(self, cid: ConversationId, message: Message, mark: DeliveryMark) -> None:
        assert message.delivery is not None
        log.info(
            "chat %s: sending an answer stored before it was sent (seq %d)", cid.key, message.seq
        )
        if mark.sending and mark.seq == message.seq:
            # Its request was out: Telegram may have it, and twice is worse than a gap.
            log.warning(
                "chat %s: a message of an answer was being sent when the bot stopped; not sent "
                "again (it may not have arrived)",
                cid.key,
            )
        sent = mark.sent(message.seq)
        under = (message.sources, message.citations)
        await self._send(cid, message.seq, message.content, message.delivery, under, sent=sent)

    async def _send(
        self,
        cid: ConversationId,
        seq: int,
        content: str,
        delivery: Delivery,
        under: tuple[Sequence[Source], Sequence[Citation]],
        *,
        sent: int,
        live: bool = False,
    ) -> None:
        # The same parts however often it is sent: a resend skips the ones Telegram took.
        sources, citations = under
        # A cited message the answer replies to is seen there; the others are quoted under it.
        quoted = [c for c in citations if c.tg_message_id != delivery.reply_to]
        parts = render(
            content,
            quote=delivery.quote,
            sources=sources,
            sources_head=delivery.sources_head,
            suffix=delivery.suffix,
            cited=cited_list(quoted, delivery.cited_head, delivery.cited_self),
        )
        done = sent

        async def accepted(n: int) -> None:
            nonlocal done
            done = n  # recorded with the next one's request (a crash before it: that counts)

        async def on_wire(out: bool) -> None:
            # Before each request: from now on Telegram may have it (bot/throttle.py).
            await self._mark(cid, seq, done, sending=out)

        token = ON_WIRE.set(on_wire)
        try:
            await send_parts(
                self.bot,
                int(cid.key),
                parts,
                delivery.reply_to,
                delivery.thread,
                skip=sent,
                accepted=accepted,
                quote=delivery.reply_quote,
            )
        except FOR_GOOD as exc:
            log.warning(
                "chat %s: an answer was not delivered, Telegram refuses it for good (%s: %s); "
                "given up",
                cid.key,
                type(exc).__name__,
                exc.message,
            )
            await self._mark(cid, seq)
            if live:
                raise
            return
        finally:
            ON_WIRE.reset(token)
        await self._mark(cid, seq)

    async def _mark(
        self, cid: ConversationId, seq: int, parts: int | None = None, *, sending: bool = False
    ) -> None:
        try:
            await self.repository.mark_delivered(cid, seq, parts, sending)
        except Exception as exc:  # sent all the same: at worst it is sent again after a restart
            log.warning("chat %s: delivery not recorded (%s)", cid.key, type(exc).__name__)


class Redelivery:
    """At start-up: the answers every chat was stored with and never sent, sent now."""

    def __init__(self, outbox: Outbox, turns: ConversationService) -> None:
        self.outbox = outbox
        self.turns = turns
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="membot:redelivery")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            await stopped(task)
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        delay = RETRY_FIRST
        while not await self.sweep():
            await asyncio.sleep(delay)  # pacing: the failure may pass (Telegram, Redis)
            delay = min(delay * 2, RETRY_MAX)

    async def sweep(self) -> bool:
        """Send what every marked chat has left; False if something is left to try again."""
        try:
            chats = await self.outbox.repository.undelivered(TELEGRAM)
        except Exception as exc:
            log.warning("unsent answers not looked for (%s); trying again", type(exc).__name__)
            return False
        if not chats:
            return True
        log.info("%d chat(s) with answers stored but not sent", len(chats))
        queue: asyncio.Queue[ConversationId] = asyncio.Queue()
        for cid in chats:
            queue.put_nowait(cid)
        failed: list[ConversationId] = []

        async def work() -> None:
            while not queue.empty():
                cid = queue.get_nowait()
                if not await self._chat(cid):
                    failed.append(cid)

        async with asyncio.TaskGroup() as group:
            for _ in range(min(CHATS_AT_ONCE, len(chats))):
                group.create_task(work())
        return not failed

    async def _chat(self, cid: ConversationId) -> bool:
        try:
            async with self.turns.ordered(cid):
                await self.outbox.flush(cid)
        except Exception as exc:
            log.warning(
                "chat %s: stored answers not sent yet (%s); trying again later",
                cid.key,
                type(exc).__name__,
            )
            return False
        return True
