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
and starts again on resume), and the resume a timer's callback: the reading task is woken
once a read, by the data, not also by a timer of its own. Over TLS, asyncio's SSL transport
still takes the socket's bytes into its buffer while paused; what is saved there is the
decryption, the parsing and the task wake-ups above it.

The body is read off aiohttp's response itself (`readany`), not through the layers the
`openai` client puts over it (its vendored transport's stream, httpx2's response): each of
them was resumed twice a read. The client keeps the aiohttp response behind two private
attributes of that transport. Should a new version move them, `reading` finds nothing and
the stream is read through httpx2 as it comes, as it was before (tests/unit/llm/test_pacing.py
then fails, so an upgrade does not lose this silently).
"""

from __future__ import annotations

import asyncio

import aiohttp
import httpx2
from aiohttp.client_proto import ResponseHandler

# Bytes a read takes at most (aiohttp's own buffer limit: a read takes all it holds).
READ_SIZE = 1 << 16


class Reading:
    """The body of a streamed response and the reading of its connection (aiohttp's)."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self._held: ResponseHandler | None = None  # the protocol paused, if any
        self._resume: asyncio.TimerHandle | None = None

    async def read(self) -> bytes:
        """What arrived since the last read (waiting for some); b"" once the body ended.
        Raises aiohttp's errors (a read timeout, a body cut short)."""
        # read(n), not readany(): it also takes the chunks the parser lets through while it
        # reads (aiohttp resumes the parser as its buffer empties), all in this one read.
        return await self._response.content.read(READ_SIZE)

    def hold(self, hold: float) -> None:
        """Pause the reading until the next multiple of `hold` seconds on the loop's clock
        (at most `hold` from now): every stream held with the same hold resumes at the same
        moment, so one wake-up of the loop serves them all. Not paused once the response let
        its connection go (its body read to the end: the connection may already serve
        another request). Held already (a read came before the beat: aiohttp resumes the
        reading as its buffer empties), it is paused again until the same beat."""
        connection = self._response.connection
        protocol = connection.protocol if connection is not None else None
        if protocol is None:
            return
        protocol.pause_reading()
        self._held = protocol
        if self._resume is None:
            loop = asyncio.get_running_loop()
            self._resume = loop.call_at((loop.time() // hold + 1) * hold, self.release)

    def release(self) -> None:
        """Resume the reading if it is held: at the beat, or now (the stream ends, however
        it ends)."""
        protocol, self._held = self._held, None
        if self._resume is not None:
            self._resume.cancel()  # a no-op when it is the timer calling
            self._resume = None
        if protocol is not None:
            protocol.resume_reading()


def ramp(hold: float, age: float) -> float:
    """The hold for text that began `age` seconds ago: `hold` halved (down to a sixteenth)
    until it is no longer than the text's age. The first words are shown at once and the
    ones right after them soon (a draft waits for a few words: it must not wait a whole
    hold for them); the halves keep every stream's reads on `hold`'s beat. Only for such a
    reader (ModelRequest.ramp): the API shows the first words as they come, and the reads
    in the ramp were a fifth of a streamed answer's (6 of 25), each costing what a read
    costs."""
    step = hold
    while step > age and step > hold / 16:
        step /= 2
    return step


def reading(response: httpx2.Response) -> Reading | None:
    """The body and the connection under `response`, if it came through the `openai`
    client's aiohttp transport; else None (read it through httpx2, as it comes)."""
    # httpx2's BoundAsyncStream around the transport's stream, which holds aiohttp's response.
    bound = getattr(response.stream, "_stream", None)
    inner = getattr(bound, "_aiohttp_response", None)
    return Reading(inner) if isinstance(inner, aiohttp.ClientResponse) else None
