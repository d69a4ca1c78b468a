"""What a model is to the rest of membot: the messages it reads, one request (messages, tools,
options), its answer and what the call cost, and the ChatModel protocol. No SDK here: the agent, the
summarizer and the usage ledger need these words, not the openai client (llm/client.py)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Protocol

ChatMessage = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Usage:
    """A call's tokens, and its cost as the provider reported it (OpenRouter's `usage.cost`,
    in its credits); None when the provider reports none."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: Decimal | None = None


@dataclass(frozen=True, slots=True)
class LLMResponse:
    content: str
    tool_calls: tuple[dict[str, Any], ...] = ()
    model: str = ""
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    # The pages the answer drew on (a web search's `url_citation` annotations), in order,
    # each once.
    sources: tuple[Source, ...] = ()


#: The most sources one answer keeps (the first cited): each is a link under the answer in
#: Telegram and a line in later prompts; a provider citing dozens of pages would crowd both.
MAX_SOURCES = 20


@dataclass(frozen=True, slots=True)
class Source:
    """A page an answer drew on: the provider's `url_citation` annotation."""

    url: str
    title: str = ""


@dataclass(frozen=True, slots=True)
class CallOptions:
    """Per-call knobs; the defaults send exactly what a plain call sends.

    ``model`` overrides the client's model for this call. ``response_format`` goes on the
    wire verbatim. ``require_parameters`` asks OpenRouter to route only to providers that
    honour every parameter sent (otherwise they may silently drop ``response_format``).
    ``web_search`` lets the model search the web on OpenRouter's side. ``sampling`` are
    OpenAI's sampling fields a client chose (temperature, top_p, seed, stop, ...), sent
    verbatim beside the rest; they never replace a field set above.
    """

    model: str | None = None
    max_tokens: int | None = None
    response_format: dict[str, Any] | None = None
    require_parameters: bool = False
    web_search: bool = False
    sampling: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")


@dataclass(frozen=True, slots=True)
class Price:
    """A model's list price in the provider's currency per token (OpenRouter's `pricing`):
    what a call costs when the provider reported its tokens but not its cost."""

    prompt: Decimal
    completion: Decimal

    def of(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        return prompt_tokens * self.prompt + completion_tokens * self.completion


@dataclass(slots=True)
class StreamNotes:
    """What a streamed call learned on its way, for a consumer that closes it early: the
    model the provider says is answering (a router such as openrouter/auto names the
    concrete one in every chunk; empty until a chunk named it) and the sources so far."""

    model: str = ""
    # The pages it cited so far (its `url_citation` annotations): an answer stopped midway
    # keeps them.
    sources: tuple[Source, ...] = ()


#: What a streamed call yields: pieces of text as the model writes them, then (last) the
#: whole LLMResponse, exactly what `complete` would have returned.
StreamItem = str | LLMResponse


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call to a model: what it reads (`messages`), the function tools it may call and
    how (`tool_choice`: "none" forbids new calls), the call's options, and its `purpose`
    (what the call is for: named in the log and in the usage ledger)."""

    messages: Sequence[ChatMessage]
    tools: Sequence[dict[str, Any]] = ()
    tool_choice: str | None = None
    options: CallOptions = field(default_factory=CallOptions)
    purpose: str = "chat"
    # A streamed call: seconds a piece of text may wait to be read with the ones after it
    # (its reader would not see it sooner); None: the model's own default.
    hold: float | None = None
    # The holds grow to `hold` over the text's first moments (llm/pacing.py `ramp`): for a
    # reader that waits for a few words before it shows any (Telegram's first draft).
    # Without it the first words are read at once and every read after them is held.
    ramp: bool = False

    def with_options(self, options: CallOptions | None) -> ModelRequest:
        """The same request with other options (None: the defaults)."""
        return replace(self, options=options if options is not None else CallOptions())

    def model_or(self, default: str) -> str:
        """The model this request asks for: its options' own, else the model's `default`."""
        return self.options.model or default


class ChatModel(Protocol):
    """What the agent and the summarizer need from a model: a completion, whole (`complete`)
    or as it is written (`stream`). A streamed call is charged, retried and refused like a
    plain one; a consumer that closes the iterator early (or is cancelled) ends the call.
    `notes`, when given, is filled in as the stream goes (the answering model): it is what
    the call reports, not part of what is asked. `model_name` is the model a request that
    names none is sent to."""

    @property
    def model_name(self) -> str: ...

    async def complete(self, request: ModelRequest) -> LLMResponse: ...

    def stream(
        self, request: ModelRequest, notes: StreamNotes | None = None
    ) -> AsyncGenerator[StreamItem, None]: ...

    async def close(self) -> None: ...
