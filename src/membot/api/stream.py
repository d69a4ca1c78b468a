"""`"stream": true` in POST /api/chat: the answer as server-sent events (text/event-stream).

    event: delta    {"content": "<piece>"}          as the model writes (UTF-8, not escapes)
    event: done     the ChatResponse, exactly as the plain call returns it
    event: error    {"error", "code"}               instead of done; nothing was stored

The response opens (200) at the first piece, so whatever is found before it (a bad request,
an unknown session, a model that refuses the call) is the usual JSON error with its status.
A client that goes away cancels the request at once (the server's handler cancellation,
api/server.py), however long the model takes to write its next piece; a write that fails
first (ConnectionResetError on its closed connection) ends it the same way. Either way the
turn ends there, the model's stream is closed and nothing is stored, so a session's round is
not counted. A connection error of the turn's own, its client still there, is an error like
any other (INTERNAL_ERROR).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson
from aiohttp import web

from membot.api.errors import ApiError, ErrorCode
from membot.api.wire import CODE
from membot.core.turn import TurnResult

log = logging.getLogger("membot.api")

#: The log's code for a stream its client left before the end.
CLIENT_GONE = "CLIENT_GONE"
#: Set on a request once its stream has opened (its status, 200, is sent).
STREAM_OPEN = web.RequestKey("membot_stream_open", bool)


class EventStream:
    """The StreamingSink of one streamed request (core.turn.StreamingSink)."""

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.response: web.StreamResponse | None = None

    async def delta(self, text: str) -> None:
        if self.response is None:
            await self.send("delta", {"content": text})
            return
        # A few a second for every stream: the bytes json.dumps would give ({"content": ...},
        # UTF-8, line breaks escaped), put together with orjson.
        await self.response.write(
            b'event: delta\ndata: {"content": ' + orjson.dumps(text) + b"}\n\n"
        )

    async def progress(self, text: str) -> None:
        return None  # streamed already, as deltas

    async def answer(self, result: TurnResult) -> None:
        return None  # `done` is written by the handler, in the API's own shape

    async def send(self, event: str, data: dict[str, Any]) -> None:
        response = self.response or await opened(self.request, self)
        await response.write(_event(event, data))

    async def end(self, event: str, data: dict[str, Any]) -> web.StreamResponse:
        """The last event and the stream's end, in one send."""
        response = self.response or await opened(self.request, self)
        await response.write_eof(_event(event, data))
        return response

    def tells(self, exc: Exception) -> bool:
        return isinstance(exc, ApiError)

    async def fail(self, exc: Exception) -> str:
        error = exc if isinstance(exc, ApiError) else ApiError(ErrorCode.INTERNAL_ERROR)
        await self.end("error", error.body())
        return error.code.value


def _event(event: str, data: dict[str, Any]) -> bytes:
    payload = json.dumps(data, ensure_ascii=False)  # one line: json escapes line breaks
    return f"event: {event}\ndata: {payload}\n\n".encode()


class _Opens(Protocol):
    response: web.StreamResponse | None


async def opened(request: web.Request, stream: _Opens) -> web.StreamResponse:
    """`stream`'s response opened now (its status and headers sent): server-sent events,
    not cached, not buffered by a proxy."""
    response = web.StreamResponse(
        status=200, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    response.content_type = "text/event-stream"
    response.charset = "utf-8"
    await response.prepare(request)
    stream.response = response
    request[STREAM_OPEN] = True
    return response


class Streamed(Protocol):
    """A streamed response, /api's (EventStream) or /v1's (api/v1/stream.py ChunkStream)."""

    @property
    def response(self) -> web.StreamResponse | None:
        """Once open (its status sent); None before."""

    def tells(self, exc: Exception) -> bool:
        """Whether `exc` is an error its client is told as it is (else: an internal one)."""

    async def fail(self, exc: Exception) -> str:
        """End the stream with its error event for `exc` (an internal error if it does not
        tell it); the code to log."""


async def streamed(
    request: web.Request, stream: Streamed, answer: Callable[[], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """`answer()`: the turn, with `stream` as its sink, and the stream's end; or, once the
    stream is open, its error event for what `answer` raised. The code to log is set on
    the request (CLIENT_GONE: the client went away). Raises what `answer` raised while
    nothing was sent yet, for the usual JSON error."""
    try:
        return await answer()
    except Exception as exc:
        if isinstance(exc, ConnectionError) and _gone(request):
            # A write failed on its closed connection: the turn ended there, stored nothing.
            log.info("a stream's client went away before its end")
            request[CODE] = CLIENT_GONE
            return stream.response or web.Response(status=200)
        # Anything else, a ConnectionError of the turn's own included, is told to a client
        # still there: before the stream opens as the usual JSON error, after as its event.
        response = stream.response
        if response is None:
            raise
        if not stream.tells(exc):  # no traceback at ERROR: frames and messages may quote it
            log.error("unexpected %s in a stream", type(exc).__name__)
            log.debug("unexpected error", exc_info=True)
        try:
            request[CODE] = await stream.fail(exc)
        except ConnectionError:
            if not _gone(request):
                raise
            request[CODE] = CLIENT_GONE
        return response


def _gone(request: web.Request) -> bool:
    """Whether the request's connection is closed (or closing): aiohttp's own test before it
    refuses a write with ConnectionResetError."""
    transport = request.transport
    return transport is None or transport.is_closing()
