"""Fewer wake-ups for a streamed answer. A model sends its answer a chunk every few tens of
milliseconds, each in a TCP segment of its own, and the event loop wakes up for each one: the
socket read, the HTTP parser, the read timeout moved on, the reading task resumed and every
layer above it. That, not the chunk's JSON, was most of what a streamed answer cost (about
100-200 µs of CPU a chunk). Pausing the connection's reading for a moment after each read lets
the kernel gather what arrives meanwhile, and the next read takes it all: one wake-up for
several chunks, for text shown at most that moment later (llm/streaming.py READ_HOLD;
Telegram's drafts come once a second).

The pause is aiohttp's own flow control (`ResponseHandler.pause_reading`/`resume_reading`, what
its reader does when its buffer is full: the transport stops reading, the read timeout stops
and starts again on resume). Over TLS, asyncio's SSL transport still takes the socket's bytes
into its buffer while paused; what is saved there is the decryption, the parsing and the task
wake-ups above it.

The `openai` client keeps the aiohttp response under its httpx2 response, behind two private
attributes of the client's vendored transport. Should a new version move them, `pausable`
finds nothing and the stream is read as it comes, as it was before
(tests/unit/llm/test_pacing.py then fails, so an upgrade does not lose this silently).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp
import httpx2


class Reading:
    """The reading of the connection a streamed response is read from (aiohttp's)."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    @contextlib.asynccontextmanager
    async def held(self, hold: float) -> AsyncIterator[None]:
        """Paused for the block and, if it ends normally, until the next multiple of `hold`
        seconds (at most `hold` from now); resumed however it ends. Not paused once the
        response let its connection go (its body read to the end: the connection may
        already serve another request)."""
        connection = self._response.connection
        protocol = connection.protocol if connection is not None else None
        if protocol is None:
            yield
            return
        loop = asyncio.get_running_loop()
        # Until the next multiple of `hold` on the loop's clock: every stream read with the
        # same hold resumes at the same moment, so one wake-up of the loop serves them all.
        until = (loop.time() // hold + 1) * hold
        protocol.pause_reading()
        try:
            yield
            await asyncio.sleep(until - loop.time())
        finally:
            protocol.resume_reading()


def ramp(hold: float, age: float) -> float:
    """The hold for text that began `age` seconds ago: `hold` halved (down to a sixteenth)
    until it is no longer than the text's age. The first words are shown at once and the
    ones right after them soon (a draft waits for a few words: it must not wait a whole
    hold for them); the halves keep every stream's reads on `hold`'s beat."""
    step = hold
    while step > age and step > hold / 16:
        step /= 2
    return step


def reading(response: httpx2.Response) -> Reading | None:
    """The reading of the connection under `response`, if it came through the `openai`
    client's aiohttp transport; else None (read it as it comes)."""
    # httpx2's BoundAsyncStream around the transport's stream, which holds aiohttp's response.
    bound = getattr(response.stream, "_stream", None)
    inner = getattr(bound, "_aiohttp_response", None)
    return Reading(inner) if isinstance(inner, aiohttp.ClientResponse) else None
