"""The vocabulary of a turn, shared by the agent and every front door: what comes in, what a
front door may ask for, what comes out, and where the words go."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, runtime_checkable

from membot.core.consult import RoundPlan
from membot.core.media import Upload
from membot.ids import ConversationId
from membot.memory.contract.citation import Citation
from membot.memory.contract.delivery import Delivery
from membot.memory.contract.models import Source
from membot.memory.contract.state import ConversationState

if TYPE_CHECKING:
    from membot.core.stops import Stop
    from membot.llm.model import CallOptions
    from membot.llm.structured import OutputSpec


@dataclass(frozen=True, slots=True)
class Incoming:
    """A user's message, as the agent needs it (no transport types). `uploads` are the
    files it brought (core/media.py), understood by the turn before the model is called:
    0..n (an album is n photos)."""

    conversation: ConversationId
    text: str
    user_id: int | None = None
    name: str | None = None
    message_id: int | None = None
    group: bool = False
    uploads: tuple[Upload, ...] = ()
    # The forum topic it was written in (a task set there fires there).
    thread: int | None = None
    # A task's turn: the firing it carries out (schedule/models.py `Firing.key`), stored with
    # its question so a firing run once is known to have run.
    task: str | None = None
    # Asked from another chat through Guest Mode (bot/guest.py): the guest query's id, stored
    # with the question (`Message.guest`) in the caller's private conversation.
    guest: str | None = None

    @property
    def aside(self) -> bool:
        """A turn beside the conversation (a due task's, a guest query's): it answers no
        consultation round, starts none, and tells nothing of the chat's language."""
        return self.task is not None or self.guest is not None


@dataclass(frozen=True, slots=True)
class TurnOptions:
    """What a front door may set for one turn.

    `start` opens a consultation of that many rounds with this message as its request;
    `finish` makes the current consultation round the final one. `system_prompt` replaces
    SYSTEM_PROMPT (an API session's own); `call` carries per-call model settings; `output`
    is the format the answer that completes the dialog must have. `state` is what a new
    conversation starts with (an API session's settings), and `files` conversation files
    stored with the turn (its system prompt). `consult_tool` offers the model
    `start_consultation` in plain chat."""

    start: int | None = None
    finish: bool = False
    system_prompt: str | None = None
    call: CallOptions | None = None
    output: OutputSpec | None = None
    state: ConversationState | None = None
    files: tuple[tuple[str, bytes], ...] = ()
    consult_tool: bool = True


@dataclass(frozen=True, slots=True)
class TurnResult:
    """What a turn produced, stored already: the answer and where the dialog stands.
    `heard` is the transcript of the turn's voice/audio/video notes (None without any), for
    a front door to quote before the answer."""

    reply: str
    model: str
    state: ConversationState
    plan: RoundPlan | None = None  # the consultation round this turn answered, if any
    heard: str | None = None
    # The user stopped the answer while it was written: `reply` is what was written until
    # then (maybe nothing), stored marked as stopped.
    stopped: bool = False
    # Where the turn is in the archive: its first message's seq and its answer's (0 until
    # stored). Provisional while the storage is down (memory/outage/repository.py).
    first_seq: int = 0
    seq: int = 0
    # The pages the answer cites (the model's web searches), stored with it: a front door
    # shows them under it (Telegram's numbered links, the API's `sources`).
    sources: tuple[Source, ...] = ()
    # The archive's messages the answer cites (core/citing.py), stored with it: Telegram
    # replies to one and quotes the others under it, the API returns `citations`.
    citations: tuple[Citation, ...] = ()
    # The model stopped at the call's max_tokens (finish_reason "length"): the answer is
    # cut there (/v1 says so as OpenAI does).
    cut: bool = False

    @property
    def complete(self) -> bool:
        return self.plan is None or self.plan.final


class ReplySink(Protocol):
    """Where the agent's words go: a Telegram chat, an HTTP response, a test."""

    async def progress(self, text: str) -> None:
        """Text the model wrote beside a tool call, shown at once (best effort)."""
        ...

    async def answer(self, result: TurnResult) -> None:
        """The turn's answer; it is stored when this is called."""
        ...


@runtime_checkable
class DeliveringSink(ReplySink, Protocol):
    """A sink whose answer must reach its reader even if the process dies between storing
    it and sending it (a Telegram chat; an HTTP response is not sent again): what `delivery`
    says is stored with the answer, and the next process sends an answer not marked
    delivered (memory/contract/delivery.py). `answer` marks it once it is sent."""

    def delivery(self, result: TurnResult) -> Delivery:
        """How this answer is sent, besides its text (`result` is not stored yet)."""
        ...


@runtime_checkable
class StreamingSink(ReplySink, Protocol):
    """A sink that shows the answer while it is written: the agent streams the model's
    calls for it (and calls the model whole for a sink without `delta`)."""

    async def delta(self, text: str) -> None:
        """More of what the model is writing, as it writes it: the answer, and in a tool
        step the text beside the call (a tool call itself is never shown; `progress` then
        marks what was streamed as that step's note). An answer held to an output format
        is checked first and does not stream. Raising here ends the turn and stores nothing:
        that is how a sink whose reader has gone away says so."""
        ...


@runtime_checkable
class PacedSink(Protocol):
    """A streaming sink whose reader sees the text at a pace of its own (Telegram's drafts,
    a second apart): a piece may wait `hold` seconds to be read from the model's stream with
    the pieces after it, unseen (llm/pacing.py: fewer reads, less CPU). Other streaming
    sinks get the model's own default."""

    @property
    def hold(self) -> float: ...

    def written(self) -> None:
        """The model has finished writing (this step's stream ended): what the reader has not
        seen of it yet goes out at once as a message (the answer, or a tool step's note), so
        the pace need not show it first. More text may follow in a later step (never raises)."""
        ...


@runtime_checkable
class HearingSink(Protocol):
    """A sink that shows what was heard in the turn's voice/audio/video notes as soon as it
    is transcribed, before the model answers (a draft's head); `TurnResult.heard` still
    carries it for the answer."""

    async def heard(self, text: str) -> None:
        """The transcript, known; the answer is not written yet (never raises)."""
        ...


@runtime_checkable
class StoppableSink(StreamingSink, Protocol):
    """A streaming sink whose reader can stop the answer while it is written (Telegram's
    Stop button, core/stops.py). Once `stop` is set, the model's stream is closed at once
    and what was written so far is the answer: stored (marked as stopped), then given to
    `answer` as any answer. A stop while tools run cancels them; nothing half-done (a call
    without its results) is stored."""

    @property
    def stop(self) -> Stop: ...


# isinstance() against a runtime-checkable Protocol looks for each of its members every time
# (15-35 µs on Python 3.11; a turn asks four or five times). A sink is of a kind by its class
# (the members are methods and properties, or set by every __init__): asked once per class.
_KINDS: dict[tuple[type, Any], bool] = {}


def _of_kind(sink: object, kind: Any) -> bool:
    key = (type(sink), kind)
    known = _KINDS.get(key)
    if known is None:
        known = _KINDS[key] = isinstance(sink, kind)
    return known


def is_delivering(sink: object) -> TypeGuard[DeliveringSink]:
    return _of_kind(sink, DeliveringSink)


def is_streaming(sink: object) -> TypeGuard[StreamingSink]:
    return _of_kind(sink, StreamingSink)


def is_paced(sink: object) -> TypeGuard[PacedSink]:
    return _of_kind(sink, PacedSink)


def is_hearing(sink: object) -> TypeGuard[HearingSink]:
    return _of_kind(sink, HearingSink)


def is_stoppable(sink: object) -> TypeGuard[StoppableSink]:
    return _of_kind(sink, StoppableSink)
