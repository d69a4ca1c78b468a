"""The fake LLM's streamed answers: a completion (the very JSON a plain call would get) sent
as OpenAI's `chat.completion.chunk` server-sent events, with the usage in one last chunk
(`stream_options.include_usage`), then `data: [DONE]`. The message's annotations (a web
search's `url_citation`s) ride in the deltas of its text, spread from the first to the last
piece, as OpenRouter may send them in any chunk.

Pacing is simulated model latency, not synchronisation: `first_delay` before the first
piece, `delay` between pieces. A client that goes away mid-stream is noticed (the write
fails, or the handler is cancelled: LocalServer cancels handlers of lost connections) and
reported to `on_gone`; each chunk written is reported to `on_chunk`. `fail_after` sends
OpenRouter's mid-stream error after that many pieces instead of the rest; `cut_after` drops
the connection there instead, the body unfinished (a proxy or a network that broke).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web


@dataclass(frozen=True, slots=True)
class Pacing:
    chars: int = 8  # characters of text (or of a tool call's arguments) per chunk
    first_delay: float = 0.0
    delay: float = 0.0
    fail_after: int | None = None  # pieces sent before a mid-stream error
    cut_after: int | None = None  # pieces sent before the connection is dropped (no end)


def chunks(completion: dict[str, Any], chars: int, *, usage: bool) -> Iterator[dict[str, Any]]:
    """The completion as chunks: the role, the text in pieces (the annotations spread over
    them), each tool call (id and name, then its arguments in pieces), the finish reason
    (with the annotations an answer without text has); the usage alone in the last one."""
    choice = completion["choices"][0]
    message = choice["message"]
    base = {k: completion[k] for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    text = message.get("content") or ""
    starts = range(0, len(text), chars)
    annotations = list(message.get("annotations") or ())
    riding: dict[int, list[dict[str, Any]]] = {}  # piece number -> the annotations it carries
    for k, annotation in enumerate(annotations if starts else ()):
        at = k * (len(starts) - 1) // max(len(annotations) - 1, 1)
        riding.setdefault(at, []).append(annotation)
    for n, start in enumerate(starts):
        delta: dict[str, Any] = {"content": text[start : start + chars]}
        if n in riding:
            delta["annotations"] = riding[n]
        yield chunk(delta)
    for index, call in enumerate(message.get("tool_calls") or ()):
        head = {"index": index, "id": call["id"], "type": call["type"]}
        yield chunk({"tool_calls": [{**head, "function": {"name": call["function"]["name"]}}]})
        arguments = call["function"]["arguments"]
        for start in range(0, len(arguments), chars):
            piece = {"index": index, "function": {"arguments": arguments[start : start + chars]}}
            yield chunk({"tool_calls": [piece]})
    yield chunk(
        {"annotations": annotations} if annotations and not starts else {}, choice["finish_reason"]
    )
    if usage:
        yield {**base, "choices": [], "usage": completion["usage"]}


def dumps(data: Any) -> bytes:
    """JSON as OpenAI writes it (UTF-8, not escaped): orjson, or the standard library for
    what orjson refuses (a scripted lone surrogate, an integer past 64 bits)."""
    try:
        return orjson.dumps(data)
    except TypeError:
        return json.dumps(data).encode()


async def send_stream(
    request: web.Request,
    body: dict[str, Any],
    completion: dict[str, Any],
    pacing: Pacing,
    on_gone: Callable[[], Awaitable[None]],
    on_chunk: Callable[[], None] = lambda: None,
) -> web.StreamResponse:
    usage = bool((body.get("stream_options") or {}).get("include_usage"))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    loop = asyncio.get_running_loop()
    try:
        await response.prepare(request)
        start = loop.time()
        for n, data in enumerate(chunks(completion, pacing.chars, usage=usage)):
            if n > 0:
                # Simulated model latency, on a schedule from the start (timers overshoot a
                # little; 150 relative sleeps would add up that much).
                due = start + pacing.first_delay + (n - 1) * pacing.delay
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())
            if pacing.cut_after is not None and n > pacing.cut_after:
                assert request.transport is not None
                request.transport.abort()
                return response
            if pacing.fail_after is not None and n > pacing.fail_after:
                error = {"error": {"message": "upstream failed", "code": 502}}
                await response.write(f"data: {json.dumps(error)}\n\n".encode())
                break
            await response.write(b"data: " + dumps(data) + b"\n\n")
            on_chunk()
        else:
            await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except (ConnectionResetError, asyncio.CancelledError):
        await asyncio.shield(on_gone())
        raise
    return response
