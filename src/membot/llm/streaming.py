"""A streamed completion read off the wire: the response's bytes cut into server-sent events,
each event's JSON decoded (llm/chunks.py) into what membot keeps of it (text pieces, tool-call
pieces, url_citation annotations, the usage in the last chunk, the finish reason, the model
that answered), put together into the one LLMResponse a plain call returns, field for field.

The `openai` client opens the request (transport, authentication, timeouts, retries, an error
status mapped to its exceptions); its per-chunk machinery is not used: its SSE decoder, its
JSON parser and its per-chunk processing took about 20 µs a chunk where this takes about 3
(chunks read back to back; a paced stream costs more a chunk, most of it the event loop
waking up for each). The body is read off the aiohttp response under it (llm/pacing.py), so
what goes wrong while it is read is mapped here, aiohttp's errors and httpx2's alike, the way
the client maps them (llm/client.py turns those into LLMError): a read timeout, a lost or
cut connection, OpenRouter's `error` event in the middle of the stream, a chunk that is not
JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import aiohttp
import httpx2
import openai
from openai.types import CompletionUsage

from membot.llm import pacing
from membot.llm.chunks import Chunk, decoded
from membot.llm.model import LLMResponse, Source, Usage
from membot.llm.pacing import Reading, reading
from membot.llm.wire import sources_of, usage_of

_DONE = b"[DONE]"
# Seconds the rest of a body after [DONE] is read for, at most (see _drain).
DRAIN_TIMEOUT = 0.1
# Seconds the connection's reading is paused after each read once the text has begun: the
# longest a piece of text waits (see llm/pacing.py for why): 2-3 pieces a second, a word or
# two each at reading speed. Each read costs a wake-up, a parse and an event written: a
# streamed API answer cost 3.5-4x the CPU of the same answer plain at 0.1 s, 1.9-2.4x at
# 0.3 s (a 375-chunk answer), 1.7-1.8x at 0.4 s (`python -m bench --only stream`).
READ_HOLD = 0.4


class Events:
    """Server-sent events framing: bytes in, in pieces of any size, and out the data of each
    complete event (its `data:` lines joined); comments and other fields are dropped."""

    def __init__(self) -> None:
        self._rest = b""
        self._after_cr = False  # the last piece ended in CR: a LF first in the next ends it too

    def feed(self, data: bytes) -> list[bytes]:
        if self._after_cr and data.startswith(b"\n"):
            data = data[1:]
        self._after_cr = data.endswith(b"\r")
        buffer = self._rest + data if self._rest else data
        if b"\r" in buffer:  # the spec allows CRLF and CR line ends too
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = buffer.rfind(b"\n\n")
        if end > 0 and buffer.startswith(b"data: "):
            # What providers send: every event one `data: ` line. Then the only line breaks
            # before the last blank line are those between the events, and one split
            # takes them all.
            events = buffer[:end]
            if events.count(b"\n") == 2 * events.count(b"\n\ndata: "):
                self._rest = buffer[end + 2 :]
                return events[6:].split(b"\n\ndata: ")
        *blocks, self._rest = buffer.split(b"\n\n")
        found = []
        for block in blocks:
            if block.startswith(b"data: ") and b"\n" not in block:  # what providers send
                found.append(block[6:])
                continue
            lines = [line[5:] for line in block.split(b"\n") if line.startswith(b"data:")]
            if lines:
                found.append(b"\n".join(line[1:] if line[:1] == b" " else line for line in lines))
        return found


class Assembler:
    """Feed it every chunk in order (`add` returns the chunk's text); `response()` is the
    whole answer. Tool calls arrive in pieces keyed by their index: the first piece carries
    the id and the name, the later ones more of the arguments' JSON text. Annotations may
    come in any chunk."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.answered_by = ""
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.annotations: list[Any] = []
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.choices = 0  # chunks that carried a choice: none at all is no answer

    def add(self, chunk: Chunk) -> str:
        model = chunk.model
        if model and isinstance(model, str):
            self.answered_by = model
        usage = chunk.usage
        if usage is not None and isinstance(usage, dict):
            self.usage = usage_of(CompletionUsage.construct(**usage))
        if not chunk.choices:
            return ""
        piece = ""
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            self.choices += 1
            finish = choice.finish_reason
            if finish and isinstance(finish, str):
                self.finish_reason = finish
            delta = choice.delta
            if delta is None:
                continue
            content = delta.content
            if content and isinstance(content, str):
                piece += content
            calls = delta.tool_calls
            if calls and isinstance(calls, list):
                for call in calls:
                    if isinstance(call, dict):
                        self._call_piece(call)
            annotations = delta.annotations
            if annotations and isinstance(annotations, list):
                self.annotations.extend(annotations)
        if piece:
            self.text.append(piece)
        return piece

    def _call_piece(self, call: dict[str, Any]) -> None:
        index = call.get("index", 0)
        slot = self.calls.setdefault(
            index if isinstance(index, int) else 0,
            {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
        )
        for key in ("id", "type"):
            value = call.get(key)
            if isinstance(value, str) and value:
                slot[key] = value
        function = call.get("function")
        if isinstance(function, dict):
            name = function.get("name")
            if isinstance(name, str) and name:
                slot["function"]["name"] = name
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                slot["function"]["arguments"] += arguments

    @property
    def sources(self) -> tuple[Source, ...]:
        return sources_of(self.annotations)

    def response(self) -> LLMResponse:
        return LLMResponse(
            content="".join(self.text),
            tool_calls=tuple(call for _, call in sorted(self.calls.items())),
            # OpenRouter reports the model that answered (a router resolves to a concrete one).
            model=self.answered_by or self.model,
            finish_reason=self.finish_reason,
            usage=self.usage,
            sources=self.sources,
        )


async def pieces(
    response: httpx2.Response,
    assembled: Assembler,
    *,
    hold: float = READ_HOLD,
    ramp: bool = False,
) -> AsyncGenerator[str, None]:
    """The text of a streamed response as it comes, each read's pieces joined into one, every
    chunk fed to `assembled`. Once the text (or a tool call) has begun, the connection's
    reading is paused after each read, up to `hold` seconds (llm/pacing.py), so the chunks
    that arrive meanwhile come in one read; the first words are never held, and with `ramp`
    the holds grow to `hold` over the text's first moments (llm/pacing.py). Closes the response
    however it ends. Raises the `openai` client's errors: APITimeoutError,
    APIConnectionError, or APIError for an `error` event, a chunk that is not JSON, or a body
    that ends with neither `[DONE]` nor a finish reason (the `openai` client took that for a
    whole answer)."""
    events = Events()
    paced = reading(response)
    read = _reader(response, paced)
    began: float | None = None  # the loop's time when the text began
    loop = asyncio.get_running_loop()
    try:
        while data := await read():
            written, done, failed = _read(events.feed(data), assembled, response.request)
            if began is None and (assembled.text or assembled.calls):
                began = loop.time()
            # The first words are never held; nor is the connection once the answer is whole.
            if paced is not None and hold > 0 and began is not None and not done and failed is None:
                paced.hold(pacing.ramp(hold, loop.time() - began) if ramp else hold)
            if written:
                yield "".join(written)
            if failed is not None:
                raise failed
            if done:
                await _drain(read)
                return
        if assembled.finish_reason is None:
            # The body ended cleanly, yet the answer did not (a proxy or the provider cut it):
            # a failed call, not a short answer stored and sent as if it were whole.
            raise openai.APIError(
                "the stream ended before the answer did", response.request, body=None
            )
    # Read off aiohttp's response, or through httpx2's: either's errors, as the client maps them.
    except (aiohttp.ServerTimeoutError, httpx2.TimeoutException) as exc:
        raise openai.APITimeoutError(request=response.request) from exc
    except (aiohttp.ClientError, httpx2.RequestError) as exc:
        raise openai.APIConnectionError(request=response.request) from exc
    finally:
        if paced is not None:
            paced.release()
        await response.aclose()


def _reader(response: httpx2.Response, paced: Reading | None) -> Callable[[], Awaitable[bytes]]:
    """What reads the body, a read at a time (b"" at its end): aiohttp's response itself, or
    httpx2's iterator when aiohttp's is out of reach or the provider compressed the body
    (aiohttp's is left compressed: the client's transport does not decode)."""
    encoded = response.headers.get("content-encoding", "identity") != "identity"
    if paced is not None and not encoded:
        return paced.read
    body = (response.aiter_bytes() if encoded else response.aiter_raw()).__aiter__()

    async def through_httpx() -> bytes:
        return await anext(body, b"")

    return through_httpx


def _read(
    payloads: list[bytes], assembled: Assembler, request: httpx2.Request
) -> tuple[list[str], bool, openai.APIError | None]:
    """One read's events: the text pieces they carry, whether the stream said `[DONE]`, and
    the error it reported if it did (what came before it in the read is still shown)."""
    written: list[str] = []
    done = False
    for n, payload in enumerate(payloads):
        if payload.startswith(_DONE):
            payloads, done = payloads[:n], True
            break
    for chunk in decoded(payloads):
        if chunk is None:
            error = openai.APIError("a chunk of the stream is not JSON", request, body=None)
            return written, False, error
        if chunk.error:
            return written, False, _stream_error(chunk.error, request)
        piece = assembled.add(chunk)
        if piece:
            written.append(piece)
    return written, done, None


async def _drain(read: Callable[[], Awaitable[bytes]]) -> None:
    """The rest of a body after `[DONE]`, read so an HTTP/1.1 connection can be reused, for
    at most DRAIN_TIMEOUT and whatever it raises: the answer is whole, and a connection that
    breaks or stays open after it must not turn it into a failed call (the `openai` client
    drains the same way)."""
    with contextlib.suppress(
        TimeoutError, aiohttp.ClientError, httpx2.HTTPError, httpx2.StreamError
    ):
        async with asyncio.timeout(DRAIN_TIMEOUT):
            while await read():
                pass


def _stream_error(error: object, request: httpx2.Request) -> openai.APIError:
    """OpenRouter's `error` event in the middle of a stream, as the `openai` client reports
    it (its message, the error object as the body)."""
    message = error.get("message") if isinstance(error, dict) else None
    if not message or not isinstance(message, str):
        message = "An error occurred during streaming"
    return openai.APIError(message, request, body=error)
