"""Fewer wake-ups for a streamed answer. A model sends its answer a chunk every few tens of
milliseconds, each in a TCP segment of its own, and the event loop wakes up for each one: the
socket read, the HTTP parser, the read timeout moved on, the reading task resumed and every
layer above it. That, not the chunk's JSON, was most of what a streamed answer cost (about
100-200 µs of CPU a chunk). Pausing the connection's reading for a moment after each read lets
the kernel gather what arrives meanwhile, and the next read takes it all: one wake-up for
several chunks, for text shown at most that moment later (llm/streaming.py READ_HOLD;
Telegram's drafts come once a second).

The pause is the connection's transport's (`pause_reading`/`resume_reading`: the socket
leaves the event loop's selector until the resume), and the resume a timer's callback: the
reading task is woken once a read, by the data, not also by a timer of its own. One timer a
beat serves every stream held until it. Not aiohttp's flow control over it (the protocol's
`pause_reading`, what its reader does when its buffer is full): that also pauses the HTTP
parser, stops the read timeout and starts it again, and feeds the parser nothing on resume,
which cost about as much as the pause itself. So aiohttp's read timeout (LLM_TIMEOUT) runs on
while a stream is held: what arrived during a hold is seen up to a hold later, so a model
silent for the whole timeout fails at most a hold sooner. Over TLS, asyncio's SSL transport
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
import weakref

import aiohttp
import httpx2

# Bytes a read takes at most (aiohttp's own buffer limit: a read takes all it holds).
READ_SIZE = 1 << 16

# Per event loop, the streams held until each beat (the loop's time); one timer a beat.
_beats: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, set[Reading]]] = (
    weakref.WeakKeyDictionary()
)


def _until(beat: float, reading: Reading) -> set[Reading]:
    """The streams held until `beat` on the running loop, `reading` among them; the first
    sets the beat's timer."""
    loop = asyncio.get_running_loop()
    beats = _beats.setdefault(loop, {})
    held = beats.get(beat)
    if held is None:
        held = beats[beat] = set()
        loop.call_at(beat, _resume, beats, beat)
    held.add(reading)
    return held


def _resume(beats: dict[float, set[Reading]], beat: float) -> None:
    for reading in beats.pop(beat, set()).copy():
        reading.release()


class Reading:
    """The body of a streamed response and the reading of its connection (aiohttp's)."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self._held: asyncio.Transport | None = None  # the transport paused, if any
        self._beat: set[Reading] | None = None  # the streams held until the same beat

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
        transport = connection.transport if connection is not None else None
        if transport is None:
            return
        transport.pause_reading()
        self._held = transport
        if self._beat is None:
            now = asyncio.get_running_loop().time()
            self._beat = _until((now // hold + 1) * hold, self)

    def release(self) -> None:
        """Resume the reading if it is held: at the beat, or now (the stream ends, however
        it ends)."""
        transport, self._held = self._held, None
        if self._beat is not None:
            self._beat.discard(self)
            self._beat = None
        if transport is not None:
            transport.resume_reading()


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
