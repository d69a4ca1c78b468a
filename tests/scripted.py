"""The core without a network: a scripted in-process `ChatModel` and a recording `ReplySink`.

    model = ScriptedModel([
        Reply("Let me check.", tool_call("calculate", expression="6*7")),
        "It is 42.",
    ])

A script item is one reply of the model, used by the requests in the order they arrive:

    "text"                      an answer
    {...} / [{...}, ...]        tool calls in OpenAI's shape (see `tool_call`), no text
    Reply(text, *calls, gate=)  both, and optionally an asyncio.Event the reply waits for
    LLMResponse(...)            exactly this
    an exception (or its class) raised by `complete`, as a failing provider would

`stream` answers the same script as a stream: the reply's text in pieces of `piece_chars`,
then the response; `Reply(midway=event)` holds the stream after its first piece until the
event is set (to act while an answer is being written). `streamed` counts the streamed
calls, `closed_early` the streams their consumer closed before the end.

Every request is recorded (messages, purpose, tools, tool_choice, options) before its reply
is given, so a test can look at what the model was shown while the reply is held by a gate.
A request beyond the script is recorded in `unexpected` and fails with AssertionError.
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

from membot.core.stops import Stop
from membot.core.turn import TurnResult
from membot.llm.model import (
    CallOptions,
    ChatMessage,
    LLMResponse,
    ModelRequest,
    Source,
    StreamItem,
    StreamNotes,
)
from tests.fakes.openai_server import without_now

MODEL = "scripted/model"

ToolCallDict = dict[str, Any]


def tool_call(name: str, call_id: str | None = None, /, **arguments: Any) -> ToolCallDict:
    """One tool call as a provider returns it in `tool_calls`."""
    return {
        "id": call_id or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def hermes_call(name: str, /, **arguments: Any) -> str:
    """The same call written as Hermes text, for models without native tool calling."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


class Reply:
    """A reply with text and/or tool calls; `gate`, when given, holds it until set."""

    __slots__ = ("gate", "midway", "model", "sources", "text", "tool_calls")

    def __init__(
        self,
        text: str = "",
        *tool_calls: ToolCallDict,
        gate: asyncio.Event | None = None,
        midway: asyncio.Event | None = None,
        model: str = MODEL,
        sources: tuple[Source, ...] = (),
    ) -> None:
        self.text = text
        self.sources = sources
        self.tool_calls = tuple(tool_calls)
        self.gate = gate
        self.midway = midway
        self.model = model


ScriptItem: TypeAlias = (
    str
    | ToolCallDict
    | list[ToolCallDict]
    | Reply
    | LLMResponse
    | BaseException
    | type[BaseException]
)


@dataclass(frozen=True)
class Request:
    """One call of `complete` or `stream`, as the model received it (a copy: what the caller
    does with its lists afterwards does not change it)."""

    messages: list[ChatMessage]
    purpose: str
    tools: list[dict[str, Any]]
    tool_choice: str | None
    options: CallOptions
    hold: float | None = None

    @classmethod
    def of(cls, request: ModelRequest) -> Request:
        return cls(
            messages=copy.deepcopy(list(request.messages)),
            purpose=request.purpose,
            tools=copy.deepcopy(list(request.tools)),
            tool_choice=request.tool_choice,
            options=request.options,
            hold=request.hold,
        )

    @property
    def system(self) -> str:
        """The system prompt ("" when the request has none)."""
        first = self.messages[0] if self.messages else {}
        return str(first.get("content") or "") if first.get("role") == "system" else ""

    @property
    def last(self) -> ChatMessage:
        return self.messages[-1]

    @property
    def user_texts(self) -> list[str]:
        """What the user messages say (the time note before a new one aside: `now`)."""
        return [
            without_now(str(m.get("content") or ""))
            for m in self.messages
            if m.get("role") == "user"
        ]

    @property
    def now(self) -> str | None:
        """The time note before the new message (core/prompt.py NOW_NOTE), None without."""
        content = str(self.messages[-1].get("content") or "") if self.messages else ""
        stripped = without_now(content)
        return content[: len(content) - len(stripped)].strip() or None

    @property
    def tool_names(self) -> list[str]:
        """The function tools declared in `tools` (native mode), in order."""
        return [t["function"]["name"] for t in self.tools if t.get("type") == "function"]

    @property
    def response_format(self) -> dict[str, Any] | None:
        return self.options.response_format


class ScriptedModel:
    """A `ChatModel` that answers from a script and records every request."""

    def __init__(self, replies: Iterable[ScriptItem] = (), *, piece_chars: int = 4) -> None:
        self.replies: list[ScriptItem] = list(replies)
        self.piece_chars = piece_chars
        self.streamed = 0
        self.closed_early = 0
        self.requests: list[Request] = []
        self.unexpected: list[Request] = []
        self.closed = False
        # Made on first use, inside the running loop.
        self._arrived: asyncio.Condition | None = None

    def script(self, *replies: ScriptItem) -> None:
        """More replies, after those already scripted."""
        self.replies.extend(replies)

    @property
    def chat_requests(self) -> list[Request]:
        return [r for r in self.requests if r.purpose == "chat"]

    def _condition(self) -> asyncio.Condition:
        if self._arrived is None:
            self._arrived = asyncio.Condition()
        return self._arrived

    async def wait_for_requests(self, count: int) -> list[Request]:
        """Wait until `count` requests have arrived (whatever their replies are doing)."""
        condition = self._condition()
        async with condition:
            await condition.wait_for(lambda: len(self.requests) >= count)
        return self.requests[:count]

    @property
    def model_name(self) -> str:
        return MODEL

    async def complete(self, request: ModelRequest) -> LLMResponse:
        return _response(await self._take(request))

    async def stream(
        self, request: ModelRequest, notes: StreamNotes | None = None
    ) -> AsyncGenerator[StreamItem, None]:
        item = await self._take(request)
        self.streamed += 1
        response = _response(item)
        if notes is not None:  # known from the start, as a provider's first chunk can say
            notes.model, notes.sources = response.model, response.sources
        midway = item.midway if isinstance(item, Reply) else None
        text = response.content
        finished = False
        try:
            for start in range(0, len(text), self.piece_chars):
                yield text[start : start + self.piece_chars]
                if start == 0 and midway is not None:
                    await midway.wait()
            finished = True
        finally:
            if not finished:
                self.closed_early += 1
        yield response

    async def _take(self, asked: ModelRequest) -> ScriptItem:
        """Record the request; its script item, once its gate (if any) is open."""
        request = Request.of(asked)
        self.requests.append(request)
        condition = self._condition()
        async with condition:
            condition.notify_all()
        if not self.replies:
            self.unexpected.append(request)
            raise AssertionError(f"the script has no reply for request #{len(self.requests)}")
        item = self.replies.pop(0)
        if isinstance(item, Reply) and item.gate is not None:
            await item.gate.wait()
        return item

    async def close(self) -> None:
        self.closed = True


def _response(item: ScriptItem) -> LLMResponse:
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, type) and issubclass(item, BaseException):
        raise item("scripted failure")
    if isinstance(item, LLMResponse):
        return item
    if isinstance(item, str):
        return LLMResponse(content=item, model=MODEL, finish_reason="stop")
    if isinstance(item, dict):
        return LLMResponse(content="", tool_calls=(item,), model=MODEL, finish_reason="tool_calls")
    if isinstance(item, list):
        return LLMResponse(
            content="", tool_calls=tuple(item), model=MODEL, finish_reason="tool_calls"
        )
    if isinstance(item, Reply):
        return LLMResponse(
            content=item.text,
            tool_calls=item.tool_calls,
            model=item.model,
            finish_reason="tool_calls" if item.tool_calls else "stop",
            sources=item.sources,
        )
    raise TypeError(f"not a script item: {item!r}")


AnswerHook = Callable[[TurnResult], Awaitable[None]]


class RecordingSink:
    """A `ReplySink` that keeps what the agent said: progress texts and answered results.

    `on_answer` runs inside `answer()` (to look at storage at that very moment); `journal`,
    shared between sinks, records `(label, reply)` in the order answers arrive.
    """

    def __init__(
        self,
        label: str = "",
        *,
        on_answer: AnswerHook | None = None,
        journal: list[tuple[str, str]] | None = None,
        fail_progress: bool = False,
    ) -> None:
        self.label = label
        self.on_answer = on_answer
        self.journal = journal
        self.fail_progress = fail_progress
        self.progress_texts: list[str] = []
        self.answers: list[TurnResult] = []
        self.events: list[tuple[str, str]] = []

    async def progress(self, text: str) -> None:
        self.progress_texts.append(text)
        self.events.append(("progress", text))
        if self.fail_progress:
            raise ConnectionError("the progress note could not be sent")

    async def answer(self, result: TurnResult) -> None:
        self.answers.append(result)
        self.events.append(("answer", result.reply))
        if self.journal is not None:
            self.journal.append((self.label, result.reply))
        if self.on_answer is not None:
            await self.on_answer(result)

    @property
    def replies(self) -> list[str]:
        return [result.reply for result in self.answers]


class StreamingSink(RecordingSink):
    """A RecordingSink that wants the answer as it is written: `deltas` keeps the pieces
    (also in `events` as ("delta", piece)); `fail_delta_after` raises on that many-th piece,
    as a sink whose reader went away does; `on_delta` runs on each piece."""

    def __init__(
        self,
        label: str = "",
        *,
        fail_delta_after: int | None = None,
        on_delta: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(label)
        self.deltas: list[str] = []
        self.fail_delta_after = fail_delta_after
        self.on_delta = on_delta

    async def delta(self, text: str) -> None:
        self.deltas.append(text)
        self.events.append(("delta", text))
        if self.fail_delta_after is not None and len(self.deltas) >= self.fail_delta_after:
            raise ConnectionResetError("the reader went away")
        if self.on_delta is not None:
            await self.on_delta(text)

    @property
    def streamed(self) -> str:
        return "".join(self.deltas)


class StoppableSink(StreamingSink):
    """A StreamingSink with a Stop button (core/turn.py StoppableSink): `stop` is the event
    the turn watches; `stop_after` presses it on that many-th piece, as a user would."""

    def __init__(self, label: str = "", *, stop_after: int | None = None) -> None:
        super().__init__(label)
        self.stop = Stop()
        self.stop_after = stop_after

    async def delta(self, text: str) -> None:
        await super().delta(text)
        if self.stop_after is not None and len(self.deltas) >= self.stop_after:
            self.stop.set()
