"""A streamed completion's chunks, decoded into what membot keeps of them: the model that
answered, each choice's text, tool-call pieces, annotations and finish reason, the usage, an
`error`. msgspec decodes a read's chunks in one call, into these shapes, skipping every field
they do not name (ids, timestamps, logprobs, the provider's own): a chunk costs about a
microsecond, where orjson's dict of every field, then walked, cost two to three. A chunk
that is JSON of another shape (a provider's quirk: `choices` not a list, a `delta` that is
not an object) is taken from orjson's dict instead, leniently, as before: what fits is kept,
the rest ignored.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
import orjson


class Delta(msgspec.Struct, gc=False):
    # Any: checked where used (llm/streaming.py Assembler), as the lenient path needs.
    content: Any = None
    tool_calls: Any = None
    annotations: Any = None


class Choice(msgspec.Struct, gc=False):
    index: Any = 0
    delta: Delta | None = None
    finish_reason: Any = None


class Chunk(msgspec.Struct, gc=False):
    model: Any = None
    choices: list[Choice] | None = None
    usage: Any = None  # the last chunk's, with stream_options.include_usage
    error: Any = None  # OpenRouter's error event in the middle of a stream


_ONE = msgspec.json.Decoder(Chunk)
_MANY = msgspec.json.Decoder(list[Chunk])


def decoded(payloads: list[bytes]) -> Iterable[Chunk | None]:
    """Each event's chunk, in order (None: not JSON): all in one call, or (one of them is not
    JSON, or not of these shapes) one at a time as they are iterated."""
    if not payloads:
        return ()
    try:
        chunks = _MANY.decode(b"[" + b",".join(payloads) + b"]")
    except msgspec.DecodeError:
        return map(one, payloads)
    # As many as there were events: a payload such as `{},{}` is not one chunk.
    return chunks if len(chunks) == len(payloads) else map(one, payloads)


def one(payload: bytes) -> Chunk | None:
    """One event's chunk; None if it is not JSON."""
    try:
        return _ONE.decode(payload)
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError:
        return None
    try:  # JSON to msgspec, not always to orjson (a lone surrogate's escape)
        return lenient(orjson.loads(payload))
    except orjson.JSONDecodeError:
        return None


def lenient(value: object) -> Chunk:
    """The chunk in JSON of another shape: the fields that have theirs, the rest left out."""
    if not isinstance(value, dict):
        return Chunk()
    raw = value.get("choices")
    choices = []
    for choice in raw if isinstance(raw, list) else ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        choices.append(
            Choice(
                index=choice.get("index", 0),
                delta=Delta(
                    content=delta.get("content"),
                    tool_calls=delta.get("tool_calls"),
                    annotations=delta.get("annotations"),
                )
                if isinstance(delta, dict)
                else None,
                finish_reason=choice.get("finish_reason"),
            )
        )
    return Chunk(
        model=value.get("model"),
        choices=choices,
        usage=value.get("usage"),
        error=value.get("error"),
    )
