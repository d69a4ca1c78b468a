"""Sessions: dialogs opened by a request rather than by a chat (the HTTP API's, docs/api.md).

A session is a conversation in the `api` namespace, stored like any other (window, summary,
tools, archive). Its first request fixes its settings (`SessionConfig`, kept in the
conversation's state with its first turn) and whether it is one plain round or a
consultation of N rounds; later requests only add the user's next message. A session idle
for longer than the TTL is gone: refused at once when asked for, and reset by the sweep.

Nothing here knows HTTP: the front door maps the errors below to its own statuses, and the
two families every layer shares as they travel: `Busy` (ConversationBusy: another request of
the session is being answered) and `Unavailable` (StorageUnavailable: the storage is down
and the request names a session, or cannot be stored at all).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from membot.clock import Clock, utc_now
from membot.core.media import Upload
from membot.core.service import ConversationService
from membot.core.turn import Incoming, ReplySink, TurnOptions, TurnResult
from membot.errors import ConversationBusy, MembotError
from membot.ids import ConversationId
from membot.llm.model import CallOptions
from membot.llm.structured import OutputSpec
from membot.memory.contract.attachment import new_file_key
from membot.memory.contract.citation import Citation
from membot.memory.contract.models import ChatMeta, Source
from membot.memory.contract.state import ConversationState, SessionConfig
from membot.redis.health import ALWAYS_UP, Health

log = logging.getLogger(__name__)


class SessionError(MembotError):
    """A request the session cannot take; str() is safe to log (no message text)."""


class SessionNotFound(SessionError):
    """No such session, or it expired."""


class DialogCompleted(SessionError):
    """The session's dialog is over: its last round has been answered."""


class InvalidMaxRounds(SessionError):
    """maxRounds below 1."""


class MaxRoundsExceeded(SessionError):
    """maxRounds above MAX_ROUNDS."""


class ModelNotAllowed(SessionError):
    """A model the operator does not offer (MODELS), asked for or kept by an older session."""

    def __init__(self, model: str, allowed: tuple[str, ...]) -> None:
        super().__init__("model not allowed")
        self.model = model
        self.allowed = allowed


@dataclass(frozen=True, slots=True)
class SessionRequest:
    message: str
    session_id: uuid.UUID | None = None
    max_rounds: int | None = None
    config: SessionConfig = field(default_factory=SessionConfig)
    uploads: tuple[Upload, ...] = ()  # files of this round (core/media.py), understood in it


@dataclass(frozen=True, slots=True)
class SessionReply:
    session_id: uuid.UUID
    content: str
    model: str
    round: int
    max_rounds: int
    complete: bool
    sources: tuple[Source, ...] = ()  # the pages the answer cites (its web searches)
    citations: tuple[Citation, ...] = ()  # the archive's messages it cites (core/citing.py)


class _Quiet:
    """The ReplySink of a request/response exchange: the answer is returned, and text the
    model writes beside a tool call is kept in the archive only (HTTP has no place for it)."""

    async def progress(self, text: str) -> None:
        return None

    async def answer(self, result: TurnResult) -> None:
        return None


class Sessions:
    def __init__(
        self,
        service: ConversationService,
        *,
        ttl: float,
        max_rounds: int,
        clock: Clock = utc_now,
        health: Health = ALWAYS_UP,
        models: tuple[str, ...] = (),
    ) -> None:
        self.service = service
        self.repository = service.repository
        # Redis's breaker (QUEUE=local): while it is open, a new session is one round.
        self.health = health
        self.ttl = timedelta(seconds=ttl)
        self.max_rounds = max_rounds
        self.clock = clock
        # The models a session may use (MODELS and the default, as /model offers them);
        # empty: any model the provider has.
        self.models = models
        # When a turn began that this process then stored, per session: the sweep's to
        # read and prune (core/session_sweep.py).
        self.answered: dict[ConversationId, datetime] = {}

    async def chat(self, request: SessionRequest, sink: ReplySink | None = None) -> SessionReply:
        """Answer one request: open a session or take its next round. Raises SessionError,
        ConversationBusy (another request of the session is in progress), StorageUnavailable,
        or LLMError (and then nothing changed: a failed first round opens no session).
        `sink`: where the answer goes as it is written (a StreamingSink); by default it is
        only returned. Whatever the sink raises ends the turn, and nothing changed either."""
        sink = sink or _Quiet()
        self._check_rounds(request.max_rounds)
        self._check_model(request.config.model)
        if request.session_id is None:
            return await self._open(request, sink)
        return await self._continue(request.session_id, request.message, sink, request.uploads)

    async def existing(self, sid: uuid.UUID) -> ConversationId:
        """The session's conversation, for reading it whole (its export); SessionNotFound
        when there is none or it has expired."""
        cid = ConversationId.api(sid)
        if self.stale(meta := await self.repository.get_meta(cid)) or not meta.state.session:
            raise SessionNotFound("no such session")
        return cid

    def _storage_up(self) -> bool:
        return self.health.available

    def _check_model(self, model: str | None) -> None:
        if model is not None and self.models and model not in self.models:
            raise ModelNotAllowed(model, self.models)

    def _check_rounds(self, rounds: int | None) -> None:
        if rounds is None:
            return
        if rounds < 1:
            raise InvalidMaxRounds("maxRounds must be at least 1")
        if rounds > self.max_rounds:
            raise MaxRoundsExceeded(f"maxRounds must be at most {self.max_rounds}")

    async def _open(self, request: SessionRequest, sink: ReplySink) -> SessionReply:
        sid = uuid.uuid4()
        cid = ConversationId.api(sid)
        config = request.config
        if request.max_rounds is not None and not self._storage_up():
            # While the storage is down no later round could find this one: one round it is.
            log.info("%s: storage unavailable, answered as a single round", cid)
            request = replace(request, max_rounds=None)
        incoming = Incoming(cid, request.message, uploads=request.uploads)
        # The system prompt is kept once, as a file of the session's, stored with its first
        # turn; the state (on every turn that changes it) names the file.
        files: tuple[tuple[str, bytes], ...] = ()
        kept = config
        if config.system_prompt is not None:
            key = new_file_key("txt")
            files = ((key, config.system_prompt.encode()),)
            kept = replace(config, system_prompt=None, system_prompt_file=key)
        async with self.service.exclusive(cid):
            began = self.clock()
            if request.max_rounds is None:
                # One plain round (no round text in the prompt), and the dialog is over. Its
                # message is in the archive only: no later round quotes it.
                initial = ConversationState(round=1, max_rounds=1, complete=True, session=kept)
                options = self._options(config, state=initial, files=files)
                result = await self.service.say(incoming, sink, options)
            else:
                options = self._options(config, state=ConversationState(session=kept), files=files)
                result = await self.service.consult(incoming, request.max_rounds, sink, options)
            self.answered[cid] = began
        return _reply(sid, result)

    async def _continue(
        self, sid: uuid.UUID, message: str, sink: ReplySink, uploads: tuple[Upload, ...] = ()
    ) -> SessionReply:
        cid = ConversationId.api(sid)
        try:
            return await self._next_round(cid, sid, Incoming(cid, message, uploads=uploads), sink)
        except ConversationBusy:
            # Busy, but perhaps only because the sweep is deleting it: an expired or unknown
            # session is SESSION_NOT_FOUND whoever holds its turn.
            meta = await self.repository.get_meta(cid)
            if meta.state.session is None or self.stale(meta):
                raise SessionNotFound("no such session") from None
            raise

    async def _next_round(
        self, cid: ConversationId, sid: uuid.UUID, incoming: Incoming, sink: ReplySink
    ) -> SessionReply:
        # Refused at once when busy (ConversationBusy): a round is never queued behind
        # another, so rounds cannot interleave or be counted twice.
        async with self.service.exclusive(cid):
            meta = await self.repository.get_meta(cid)
            config = meta.state.session
            if meta.messages_total == 0 or config is None:
                raise SessionNotFound("no such session")
            if self._expired(meta):
                # Gone the moment it expired, whether or not the sweep has come by yet.
                await self.service.reset(cid)
                log.info("%s: session expired", cid)
                raise SessionNotFound("the session expired")
            if not meta.state.consulting:
                raise DialogCompleted("the dialog is complete")
            # Opened before MODELS stopped offering its model: refused, not answered by
            # another model halfway through the dialog.
            self._check_model(config.model)
            config = await self._system_prompt(cid, config)
            began = self.clock()
            result = await self.service.say(incoming, sink, self._options(config))
            self.answered[cid] = began
        return _reply(sid, result)

    async def _system_prompt(self, cid: ConversationId, config: SessionConfig) -> SessionConfig:
        """The config with its system prompt read from the session's file, if kept there."""
        if config.system_prompt_file is None:
            return config
        data = await self.repository.get_file(cid, config.system_prompt_file)
        if data is None:
            log.warning("%s: the session's system prompt file is missing", cid)
            return config
        return replace(config, system_prompt=data.decode())

    def _options(
        self,
        config: SessionConfig,
        *,
        state: ConversationState | None = None,
        files: tuple[tuple[str, bytes], ...] = (),
    ) -> TurnOptions:
        structured = config.output_format == "json" or config.output_schema is not None
        return TurnOptions(
            system_prompt=config.system_prompt,
            # Web search: WEB_SEARCH, unless the first request said disableSearch (the
            # agent reads it from the session's state, ConversationState.searches).
            call=CallOptions(model=config.model, max_tokens=config.max_tokens),
            output=OutputSpec(config.output_schema) if structured else None,
            state=state,
            files=files,
            consult_tool=False,  # a session's shape is its first request's, not the model's
        )

    def _expired(self, meta: ChatMeta) -> bool:
        last = meta.updated_at or meta.created_at
        return last is None or self.clock() - last > self.ttl

    def stale(self, meta: ChatMeta) -> bool:
        """Expired, or never a session (a directory left without a first turn)."""
        return meta.messages_total == 0 or self._expired(meta)


def _reply(sid: uuid.UUID, result: TurnResult) -> SessionReply:
    plan = result.plan
    return SessionReply(
        session_id=sid,
        content=result.reply,
        model=result.model,
        round=plan.round if plan else 1,
        max_rounds=plan.max_rounds if plan else 1,
        complete=result.complete,
        sources=result.sources,
        citations=result.citations,
    )
