"""The runner: takes updates from an intake, keeps a lane per chat, feeds each to the handler.

One update of a chat at a time, in update_id order (lanes.py); chats side by side, up to
`concurrency` updates in hand (None: no limit). For each update the runner holds the chat's
turn (the conversation service's, shared with the HTTP API and, with Redis, with every other
process), and inside it asks the intake's fence whether the update is still its to answer,
skips a possible repeat whose question is in the chat's archive already, feeds the handler
(the dispatcher), and tells the intake it is done before the turn is let go.

A failure that passes (Redis or the storage unreachable) leaves the update to be tried again,
as a possible repeat, with backoff, the chat's later updates waiting behind it, when the
intake retries (the stream); otherwise the update is done (the handler apologised already).
A turn cancelled (the shutdown's grace over, or a second signal) is never done: the journal
replays it at the next start, the stream gives it to the shard's next holder.

An album (photos or documents sharing a media_group_id, one update each) is one turn: its
first part waits in its lane until no other part has come for ALBUM_QUIET, then the parts
are fenced, handled together and marked done in the same turn, each of them.

Control updates (Telegram's Stop on a draft) take no lane and no turn: the turn they stop
holds both. The intake gives them apart (`control`, intake/controls.py), and the runner
hands each at once to `stops` (core/stops.py), which stops that answer if this process is
writing it and ignores it otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Protocol

from membot.ids import ConversationId
from membot.intake.albums import album_of
from membot.intake.contract import Entry, Intake, NotHolder, transient
from membot.intake.lanes import Lanes, report
from membot.intake.repeats import answered, guest_answered, guest_of, question_of
from membot.memory.contract.repository import ChatRepository
from membot.tasks import hurried_wait, stopped

log = logging.getLogger(__name__)


class Handler(Protocol):
    """Answers one update, or an album (its parts, in order): one turn, one answer."""

    def __call__(self, entry: Entry, /, *parts: Entry) -> Awaitable[None]: ...


# Longest wait between two tries of an update that failed for a passing reason.
MAX_BACKOFF = 10.0
# An album's parts are gathered until none more has come for this long (seconds).
ALBUM_QUIET = 1.0
# With no limit on updates in hand, how many one take may bring.
UNLIMITED = 1 << 20


class Turns(Protocol):
    """The conversation service's turn (core/service.py `ordered`)."""

    def ordered(self, cid: ConversationId | None) -> AbstractAsyncContextManager[None]: ...


def conversation_of(entry: Entry) -> ConversationId | None:
    """The chat's conversation; None for an update without a chat (counted, not ordered)."""
    chat = entry.chat
    if chat and (chat.isdigit() or (chat[0] == "-" and chat[1:].isdigit())):
        return ConversationId.telegram(int(chat))
    return None


class Runner:
    def __init__(
        self,
        intake: Intake,
        handler: Handler,
        *,
        turns: Turns,
        repository: ChatRepository,
        concurrency: int | None = None,
        album_quiet: float = ALBUM_QUIET,
        stops: Callable[[int, int], bool] | None = None,
    ) -> None:
        self.intake = intake
        self.handler = handler
        self.turns = turns
        self.repository = repository
        self.concurrency = concurrency
        self.album_quiet = album_quiet
        self.stops = stops  # (chat id, draft id): stop that answer, if written here
        self.handled = 0
        self._taking: asyncio.Task[None] | None = None
        self._controlling: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()  # set: no new update is taken
        self._lanes_stop = asyncio.Event()  # set: no lane starts another update
        self._freed = asyncio.Event()
        self.lanes = Lanes(
            self._handle, intake.let_go, stopping=self._lanes_stop, freed=self._freed
        )

    async def start(self) -> None:
        self._taking = asyncio.create_task(self._take_loop(), name="intake-take")
        self._taking.add_done_callback(report)
        self._controlling = asyncio.create_task(self._control_loop(), name="intake-control")
        self._controlling.add_done_callback(report)

    async def stop(self, grace: float, hurry: asyncio.Event | None = None) -> None:
        """Take nothing more; finish what is in hand within `grace` seconds, or until `hurry`
        is set. With the stream, what has not started is left pending; with the journal,
        everything put is answered. What is cut short is left pending in either: the journal
        replays it at the next start, the stream gives it to the next holder of its shard."""
        self._stop.set()
        if self.intake.leaves_pending:
            self._lanes_stop.set()
        if self._taking is not None:
            self._taking.cancel()
            await asyncio.gather(self._taking, return_exceptions=True)
        await self.intake.stop()
        if not self.intake.leaves_pending:
            for entry in self.intake.rest():
                self.lanes.add(entry)
        late = await hurried_wait(set(self.lanes.tasks.values()), grace, hurry)
        if late:
            log.warning(
                "intake: %d update(s) cut short by %s, left pending to be answered after the "
                "restart",
                len(self.lanes),
                "the second signal" if hurry is not None and hurry.is_set() else "shutdown",
            )
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        if self._controlling is not None:  # a turn finishing in the grace can be stopped
            await stopped(self._controlling)
            await asyncio.gather(self._controlling, return_exceptions=True)

    async def _take_loop(self) -> None:
        while not self._stop.is_set():
            room = UNLIMITED if self.concurrency is None else self.concurrency - len(self.lanes)
            if room <= 0:
                self._freed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._freed.wait(), 1.0)
                continue
            for entry in await self.intake.take(room):
                self.lanes.add(entry)

    async def _control_loop(self) -> None:
        """Until the runner has finished its turns (a stop may come during the grace)."""
        while True:
            try:
                entries = await self.intake.control()
            except Exception as exc:  # whatever it is, stops must keep coming after it
                if transient(exc):
                    self.intake.outage(exc)  # the updates' own path says when it is back
                else:
                    log.error("intake: control updates failed (%s)", type(exc).__name__)
                await asyncio.sleep(1.0)  # backoff: listening again subscribes again
                continue
            for entry in entries:
                self._control(entry)

    def _control(self, entry: Entry) -> None:
        """A stop: (chat id, draft id) to `stops`, from Telegram's JSON."""
        try:
            stopped = json.loads(entry.data)["stopped_message_generation"]
            chat_id, draft_id = int(stopped["chat"]["id"]), int(stopped["draft_id"])
        except (ValueError, KeyError, TypeError):
            log.warning("intake: control update %s not understood; ignored", entry.update_id)
            return
        if self.stops is None or not self.stops(chat_id, draft_id):
            log.debug("intake: update %s stops nothing in progress here", entry.update_id)

    # -- one update --------------------------------------------------------------------------

    async def _handle(self, entry: Entry) -> None:
        parts: list[Entry] = []
        album = album_of(entry)
        if album is not None:
            parts = await self.lanes.gather(entry, lambda e: album_of(e) == album, self.album_quiet)
        try:
            await self._handle_group([entry, *parts])
        finally:
            for part in parts:
                self.lanes.release(part)

    async def _handle_group(self, group: list[Entry]) -> None:
        """One update, or an album's parts: one turn."""
        handled = acked = False
        attempt = 0
        while True:
            try:
                if not handled:
                    acked = await self._turn(group)
                    handled = True
                if not acked:  # else done in its turn
                    await self._done(group)
                self.handled += len(group)
                self.intake.up()
                return
            except NotHolder as lost:
                if lost.again:
                    group = [replace(e, redelivered=True) for e in group]
                    continue
                self.lanes.drop_queued(lost.shard)
                return
            except Exception as exc:
                if not self.intake.retries:  # done in its turn: the journal forgets it
                    log.error(
                        "intake: update %s failed (%s)", group[0].update_id, type(exc).__name__
                    )
                    return
                if not transient(exc):
                    log.error(
                        "intake: update %s failed for good (%s); acknowledged",
                        group[0].update_id,
                        type(exc).__name__,
                    )
                    handled = True
                    continue
                self.intake.outage(exc)
            if self._stop.is_set() or not self.intake.keeps(group[0]):
                return  # left pending: the shard's next holder takes it over
            # Tried again as a possible repeat: the failed try may have stored its turn.
            group = [replace(e, redelivered=True) for e in group]
            attempt += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), min(0.25 * 2**attempt, MAX_BACKOFF))

    async def _turn(self, group: list[Entry]) -> bool:
        """Inside the chat's turn: fence, repeat, handler, done. True when done in the turn
        (a handled update is acknowledged before the turn is let go, so a process that took
        its shard over and waits for the turn finds it done, whatever its kind)."""
        async with self.turns.ordered(conversation_of(group[0])):
            try:
                fresh = [e for e in group if not await self.intake.fence(e)]
                if fresh and not await self._repeat(fresh):
                    await self.handler(*fresh)
            except NotHolder:
                raise
            except Exception:
                # The handler's own failure: it apologised, the journal forgets the update.
                # A cancellation (a hurried shutdown) is not done: it is answered after the
                # restart, the journal replaying it or the stream keeping it.
                if not self.intake.retries:
                    await self._done(group)
                raise
            try:
                await self._done(group)
            except Exception as exc:
                if not transient(exc):
                    raise
                # Acknowledged after the turn instead, with the runner's tries.
                log.debug("update %s: not acknowledged in its turn: %s", group[0].update_id, exc)
                return False
            return True

    async def _done(self, group: list[Entry]) -> None:
        """An album's first part last: it is the question the archive keeps, so a crash
        between two marks leaves it, and a repeat of the rest is recognised by it."""
        for entry in reversed(group):
            await self.intake.done(entry)

    async def _repeat(self, group: list[Entry]) -> bool:
        """An update taken over from another process (or tried again after a failure) is
        skipped if its question is in the chat's archive: its turn was stored (the answer
        went out, or the process died in the instant between the two). An album is one
        question: any part of it stored says so."""
        if not any(e.redelivered for e in group):
            return False
        for entry in group:
            question, guest = question_of(entry), guest_of(entry)
            if (question is not None and await answered(self.repository, *question)) or (
                guest is not None and await guest_answered(self.repository, *guest)
            ):
                log.info("update %s was answered before it was taken over", entry.update_id)
                return True
        return False
