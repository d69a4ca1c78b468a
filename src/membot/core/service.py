"""The conversation service: the one door every front end (Telegram, HTTP) goes through.

It owns what is true of a conversation whatever the transport: its messages are handled one
at a time and in arrival order, the process knows how many are in flight (so shutdown can
wait for them), and its state (chat or consultation, round, max rounds, initial request)
changes only through here, with the turn that changes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

from membot.core.agent import Agent
from membot.core.stops import Stops
from membot.core.turn import Incoming, ReplySink, TurnOptions, TurnResult
from membot.core.turnlock import TurnLocks
from membot.errors import ConversationBusy
from membot.ids import TELEGRAM, ConversationId
from membot.locks import KeyedLocks
from membot.memory.contract.repository import ChatRepository, StorageUnavailable
from membot.memory.contract.state import ConversationState
from membot.schedule.store import TaskStore
from membot.tasks import hurried_wait
from membot.usage import OverLimit, Quota, charged_to

log = logging.getLogger(__name__)


class ConversationService:
    def __init__(
        self,
        agent: Agent,
        repository: ChatRepository,
        *,
        consult_rounds: int,
        max_rounds: int,
        turn_locks: TurnLocks | None = None,
        quota: Quota | None = None,
        task_store: TaskStore | None = None,
    ) -> None:
        self.agent = agent
        self.repository = repository
        # The chats' reminders and scheduled tasks: a reset removes a chat's with the rest.
        self.task_store = task_store
        # Across processes (STORAGE=redis): taken once the local lock is held.
        self.turn_locks = turn_locks
        self.quota = quota
        self._quota_failing = False
        self.consult_rounds = consult_rounds
        self.max_rounds = max_rounds
        self._locks = KeyedLocks()
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        # The answers being written here that a user can stop (Telegram's Stop button): a
        # front door registers one for its turn, the intake's runner stops it.
        self.stops = Stops()

    # -- ordering and shutdown ---------------------------------------------------------------

    @asynccontextmanager
    async def ordered(self, cid: ConversationId | None) -> AsyncIterator[None]:
        """Hold the conversation's turn: callers run one after another, first come first
        served (asyncio.Lock wakes its waiters in FIFO order). Counted as in flight while
        waiting too, so shutdown waits for work already accepted. None: counted only."""
        self._enter()
        try:
            if cid is None:
                yield
            else:
                async with self._locks(cid), self._across(cid, wait=True):
                    yield
        finally:
            self._leave()

    @asynccontextmanager
    async def exclusive(self, cid: ConversationId) -> AsyncIterator[None]:
        """Like `ordered`, but refuses at once with ConversationBusy instead of queueing."""
        lock = self._locks(cid)
        if lock.locked():
            raise ConversationBusy(str(cid))
        self._enter()
        try:
            async with lock, self._across(cid, wait=False):
                yield
        finally:
            self._leave()

    @asynccontextmanager
    async def _across(self, cid: ConversationId, *, wait: bool) -> AsyncIterator[None]:
        """The conversation's turn in every other process too, when there are others."""
        async with contextlib.AsyncExitStack() as stack:
            if self.turn_locks is not None:
                await stack.enter_async_context(self.turn_locks.hold(cid, wait=wait))
            yield

    def _enter(self) -> None:
        self._in_flight += 1
        self._idle.clear()

    def _leave(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self._idle.set()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def wait_idle(self, timeout: float, hurry: asyncio.Event | None = None) -> bool:
        """Wait until nothing is in flight; False if `timeout` passed, or `hurry` was set,
        first."""
        idle = asyncio.ensure_future(self._idle.wait())
        if await hurried_wait({idle}, timeout, hurry):
            idle.cancel()
            log.warning("shutdown: %d conversation turn(s) still in flight", self._in_flight)
            return False
        return True

    # -- turns and state (the caller holds the conversation's turn) --------------------------

    async def state(self, cid: ConversationId) -> ConversationState:
        return (await self.repository.get_meta(cid)).state

    async def admit(self, incoming: Incoming) -> None:
        """Raise OverLimit when the user may not send this message to the model now (a
        budget is spent, or the rate limit reached); otherwise it is counted. Front doors
        call it before anything is sent or stored. A ledger that cannot be read lets the
        message through (logged once): an outage must not silence the bot."""
        if self.quota is None:
            return
        try:
            await self.quota.admit(incoming.user_id)
        except OverLimit:
            raise
        except Exception as exc:  # the ledger's storage failed
            if not self._quota_failing:
                log.warning("limits: not checked, the usage ledger failed (%s)", type(exc).__name__)
            self._quota_failing = True
        else:
            self._quota_failing = False

    async def say(
        self, incoming: Incoming, sink: ReplySink, options: TurnOptions | None = None
    ) -> TurnResult:
        """A message in whatever mode the conversation is: a chat turn or the next round."""
        with charged_to(incoming.user_id, incoming.conversation):
            return await self.agent.respond(incoming, sink, options)

    async def consult(
        self,
        incoming: Incoming,
        rounds: int | None,
        sink: ReplySink,
        options: TurnOptions | None = None,
    ) -> TurnResult:
        """Start a consultation of `rounds` (default CONSULT_ROUNDS) on this request; the
        answer is round 1. Every front door starts one here (/consult, an API session with
        maxRounds); `options` are the rest of the turn's (an API session's settings).
        Raises ValueError when `rounds` is outside 1..MAX_ROUNDS."""
        n = self.consult_rounds if rounds is None else rounds
        if not 1 <= n <= self.max_rounds:
            raise ValueError(f"rounds must be from 1 to {self.max_rounds}")
        opts = replace(options or TurnOptions(), start=n)
        with charged_to(incoming.user_id, incoming.conversation):
            result = await self.agent.respond(incoming, sink, opts)
        log.info("%s: consultation started, %d rounds", incoming.conversation, n)
        return result

    async def finish(self, incoming: Incoming, sink: ReplySink) -> TurnResult | None:
        """The final answer now, in the current round; None outside a consultation."""
        if not (await self.state(incoming.conversation)).consulting:
            return None
        with charged_to(incoming.user_id, incoming.conversation):
            return await self.agent.respond(incoming, sink, TurnOptions(finish=True))

    async def cancel(self, cid: ConversationId) -> ConversationState | None:
        """End the consultation without an answer; the state it had, or None if none."""
        state = await self.state(cid)
        if not state.consulting:
            return None
        ended = replace(
            state, mode="chat", round=0, max_rounds=0, initial_request="", initial_seq=0
        )
        await self.repository.set_state(cid, ended)
        log.info("%s: consultation cancelled in round %d", cid, state.round + 1)
        return state

    async def set_language(self, cid: ConversationId, language: str) -> ConversationState:
        """Set the conversation's language by hand (/language); it is not detected again.
        Raises StorageUnavailable while the storage is unreachable: the state read then is a
        stand-in, and writing it back would replace the conversation's real one."""
        return await self._set(cid, language=language)

    async def set_model(self, cid: ConversationId, model: str | None) -> ConversationState:
        """The chat's own model (/model); None: the default. Like set_language, refused
        with StorageUnavailable while the storage cannot be read."""
        return await self._set(cid, model=model)

    async def set_persona(self, cid: ConversationId, persona: str | None) -> ConversationState:
        """The chat's own system prompt (/persona); None: SYSTEM_PROMPT again."""
        return await self._set(cid, persona=persona)

    async def set_timezone(self, cid: ConversationId, zone: str | None) -> ConversationState:
        """The chat's time zone (/timezone, an IANA name checked by the caller); None: the
        TIMEZONE setting. Like set_language, refused while the storage cannot be read."""
        return await self._set(cid, timezone=zone)

    async def set_search(self, cid: ConversationId, on: bool) -> ConversationState:
        """Whether the model may search the web in this chat (/search); WEB_SEARCH decides
        above it. Like set_language, refused while the storage cannot be read."""
        return await self._set(cid, search_off=not on)

    async def await_import(
        self, cid: ConversationId, user_id: int | None, until: str | None
    ) -> ConversationState:
        """/import without a file: this user's next document before `until` (ISO 8601) is
        the export; None, None: no longer awaited."""
        return await self._set(cid, import_by=user_id, import_until=until)

    async def _set(
        self, cid: ConversationId, **changes: str | int | bool | None
    ) -> ConversationState:
        meta = await self.repository.get_meta(cid)
        if meta.degraded:
            raise StorageUnavailable(f"{cid}: the conversation's state cannot be read now")
        state = replace(meta.state, **changes)  # type: ignore[arg-type]
        await self.repository.set_state(cid, state)
        log.info("%s: %s changed", cid, ", ".join(changes))
        return state

    async def reset(self, cid: ConversationId) -> ConversationState:
        """Forget the conversation, a consultation in progress included, and a Telegram
        chat's tasks; the state it had. The tasks go first: none fires into a chat that was
        told everything is forgotten."""
        state = await self.state(cid)
        if self.task_store is not None and cid.namespace == TELEGRAM:
            dropped = await self.task_store.clear(cid.chat_id)
            if dropped:
                log.info("%s: %d task(s) removed with the reset", cid, dropped)
        await self.agent.reset(cid)
        return state

    async def aclose(self) -> None:
        await self.agent.aclose()
