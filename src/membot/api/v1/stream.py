"""`"stream": true` on /v1/chat/completions: OpenAI's server-sent events, each
`data: <a chat.completion.chunk>` (no `event:` line), ending with `data: [DONE]`.

    the first piece        delta {"role": "assistant", "content": "<piece>"}
    more pieces            delta {"content": "<piece>"}
    the end                delta {} (with the sources as `annotations` and membot's
                           `citations`), finish_reason "stop" (or "length":
                           cut at max_tokens)
    include_usage          usage: null on those; then one chunk, choices [], with `usage`
    an error, once open    data: {"error": {...}} in OpenAI's shape, and no [DONE]

As for /api/chat's stream (api/stream.py), the response opens at the first piece, so an
error found before it is the usual JSON error with its status; a client that goes away ends
the turn and nothing is stored.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from membot.api.stream import opened
from membot.api.v1.errors import V1Error
from membot.core.turn import TurnResult


class ChunkStream:
    """The StreamingSink of one streamed /v1 request (core.turn.StreamingSink)."""

    def __init__(
        self, request: web.Request, completion_id: str, created: int, model: str, usage: bool
    ) -> None:
        self.request = request
        self.response: web.StreamResponse | None = None
        self._head = {"id": completion_id, "object": "chat.completion.chunk", "created": created}
        self.model = model
        self.usage = usage  # include_usage: `usage: null` on every chunk but the last
        self._written = False

    async def delta(self, text: str) -> None:
        first = self.response is None
        await self.chunk({"role": "assistant", "content": text} if first else {"content": text})
        self._written = self._written or bool(text)

    async def progress(self, text: str) -> None:
        # What was streamed was a note beside a tool call: the answer follows on a new line.
        if self._written:
            await self.chunk({"content": "\n\n"})
            self._written = False

    async def answer(self, result: TurnResult) -> None:
        return None  # the last chunks are written by the handler, with the usage

    async def chunk(
        self, delta: dict[str, Any], finish: str | None = None, model: str | None = None
    ) -> None:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        event: dict[str, Any] = {**self._head, "model": model or self.model, "choices": [choice]}
        if self.usage:
            event["usage"] = None
        await self.send(event)

    async def send(self, event: dict[str, Any]) -> None:
        await self.write(json.dumps(event, ensure_ascii=False))

    async def write(self, data: str) -> None:
        response = self.response or await opened(self.request, self)
        await response.write(f"data: {data}\n\n".encode())

    async def finish(
        self,
        content: str,
        model: str,
        end: dict[str, Any],
        usage: dict[str, Any],
        reason: str = "stop",
    ) -> web.StreamResponse:
        """The end: what was not streamed (an answer held to a format, or none at all), the
        finishing chunk, the usage if asked, [DONE]."""
        if self.response is None:
            await self.delta(content)
        await self.chunk(end, reason, model)
        if self.usage:
            await self.send({**self._head, "model": model, "choices": [], "usage": usage})
        return await self.close("[DONE]")

    async def close(self, data: str) -> web.StreamResponse:
        """The last event and the stream's end, in one send."""
        response = self.response or await opened(self.request, self)
        await response.write_eof(f"data: {data}\n\n".encode())
        return response

    def tells(self, exc: Exception) -> bool:
        return isinstance(exc, V1Error)

    async def fail(self, exc: Exception) -> str:
        if isinstance(exc, V1Error):
            error = exc
        else:
            error = V1Error(500, "internal_error", "Something went wrong on our side.")
        await self.close(json.dumps(error.body(), ensure_ascii=False))
        return error.code
