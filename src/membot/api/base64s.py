"""Files sent as base64 in a request body (/api/chat's attachments, /v1's content parts):
their size known from the text's length, and their bytes decoded without stopping the event
loop.

binascii holds the GIL while it decodes, so one call on a whole file stops the loop as
long, in a worker thread too (measured on 2 loaded cores: 18 MB at once, 175 ms); decoded
in a worker thread CHUNK characters at a time, the loop gets the GIL back between chunks
(at most 17 ms). A chunk takes about 1 ms; shorter text is decoded at once, in the loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii

CHUNK = 256 * 1024  # characters, a multiple of 4


def decoded_size(data: str) -> int:
    """How many bytes base64 `data` decodes to (when valid: 4 characters for every 3
    bytes, the last group's `=` padding standing for none)."""
    return len(data) // 4 * 3 - data.endswith("=") - data.endswith("==")


async def decode(data: str) -> bytes:
    """`data` as `b64decode(data, validate=True)` decodes it; binascii.Error (a ValueError)
    where it would refuse it."""
    if len(data) <= CHUNK:
        return base64.b64decode(data, validate=True)
    return await asyncio.to_thread(decode_in_chunks, data)


def decode_in_chunks(data: str) -> bytes:
    """`data` as `b64decode(data, validate=True)` decodes it, CHUNK characters at a time."""
    if len(data) % 4:
        raise binascii.Error("base64 of a length that is not a multiple of 4")
    parts = []
    for start in range(0, len(data), CHUNK):
        chunk = data[start : start + CHUNK]
        if start + CHUNK < len(data) and chunk.endswith("="):
            # Valid in a chunk of its own, not inside the data: only its end is padded.
            raise binascii.Error("base64 padding before the end")
        parts.append(base64.b64decode(chunk, validate=True))
    return b"".join(parts)
