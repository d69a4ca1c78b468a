"""A streamed completion read off the wire (llm/streaming.py): server-sent events however the
bytes are cut, the chunks' JSON, and what goes wrong while the body is read, mapped as the
`openai` client maps it. The responses are real httpx2 responses over the given bytes; the
whole path through the client and the fake server is in test_streaming.py."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai
import pytest

from membot.llm.model import Source
from membot.llm.streaming import Assembler, Events, pieces

REQUEST = httpx2.Request("POST", "https://openrouter.ai/api/v1/chat/completions")


def event(chunk: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def text(piece: str, **delta: Any) -> dict[str, Any]:
    """A chunk whose delta carries `piece` (and whatever else is given)."""
    return {"model": "vendor/m", "choices": [{"index": 0, "delta": {"content": piece, **delta}}]}


STREAM = b"".join(
    [
        b": OPENROUTER PROCESSING\n\n",  # a keep-alive comment
        event(text("Hel")),
        b"event: message\nid: 7\r\ndata: " + json.dumps(text("lo")).encode() + b"\r\n\r\n",
        event(text(", world")),
        b"data: [DONE]\n\n",
    ]
)


def test_events_are_the_same_however_the_bytes_are_cut() -> None:
    whole = Events().feed(STREAM)
    assert [json.loads(e) for e in whole[:3]] == [text("Hel"), text("lo"), text(", world")]
    assert whole[3] == b"[DONE]"
    for cut in range(1, len(STREAM)):  # a read may end anywhere, in a CRLF too
        events = Events()
        assert events.feed(STREAM[:cut]) + events.feed(STREAM[cut:]) == whole
    one_by_one = Events()
    assert [e for i in range(len(STREAM)) for e in one_by_one.feed(STREAM[i : i + 1])] == whole


def test_a_providers_events_are_the_same_however_the_bytes_are_cut() -> None:
    # Every event one `data: ` line (what providers send), text with line breaks and
    # `data: ` in it escaped in its JSON; and a read that ends with a line break or two.
    plain = b"".join(
        [event(text("a\n\ndata: b")), event(text("c")), event(text("")), b"data: [DONE]\n\n"]
    )
    whole = Events().feed(plain)
    assert [json.loads(e) for e in whole[:3]] == [text("a\n\ndata: b"), text("c"), text("")]
    assert whole[3] == b"[DONE]"
    for cut in range(1, len(plain)):
        events = Events()
        assert events.feed(plain[:cut]) + events.feed(plain[cut:]) == whole
    first = len(event(text("a\n\ndata: b")))
    mixed = Events()  # another kind of event among them
    assert mixed.feed(plain[:first] + b"id: 1\n" + plain[first:]) == whole


def test_an_events_data_lines_are_joined() -> None:
    assert Events().feed(b'data: {"a":\ndata:1}\r\r') == [b'{"a":\n1}']
    assert Events().feed(b"id: 1\nretry: 5\n\n") == []  # no data: nothing to dispatch


async def body(*parts: bytes, error: Exception | None = None) -> AsyncIterator[bytes]:
    for part in parts:
        yield part
    if error is not None:
        raise error


def response(content: AsyncIterator[bytes], **headers: str) -> httpx2.Response:
    """A response whose body is still to be read, as a streamed call's is."""
    return httpx2.Response(200, content=content, headers=headers, request=REQUEST)


async def read(answer: httpx2.Response) -> tuple[list[str], Assembler]:
    assembled = Assembler("asked/model")
    return [piece async for piece in pieces(answer, assembled)], assembled


async def test_pieces_and_the_answer_they_make() -> None:
    after = event(text(" and more"))  # after [DONE]: not part of the answer
    cut = STREAM.index(b"event:") + 3
    written, assembled = await read(
        response(body(STREAM[:40], STREAM[40:cut], STREAM[cut:], after))
    )
    assert written == ["Hel", "lo, world"]  # what one read brings is one piece
    answer = assembled.response()
    assert (answer.content, answer.model) == ("Hello, world", "vendor/m")


async def test_a_compressed_stream_is_decoded() -> None:
    packed = gzip.compress(STREAM)
    written, _ = await read(response(body(packed), **{"content-encoding": "gzip"}))
    assert written == ["Hello, world"]


async def test_annotations_from_any_chunk_are_the_sources_each_url_once() -> None:
    def cite(url: str, title: str = "") -> dict[str, Any]:
        return {"type": "url_citation", "url_citation": {"url": url, "title": title}}

    chunks = [
        text("A", annotations=[cite("https://a.example/", "")]),
        text("B"),
        text("C", annotations=[cite("https://b.example/", "B"), cite("https://a.example/", "A")]),
        {"choices": [{"index": 0, "delta": {"annotations": [{"type": "file", "file": {}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    _, assembled = await read(response(body(*map(event, chunks))))
    assert assembled.response().sources == (
        Source("https://a.example/", "A"),  # first cited without a title, then with one
        Source("https://b.example/", "B"),
    )


async def test_an_error_event_is_the_providers_error() -> None:
    failed = event({"error": {"message": "upstream failed", "code": 502}})
    with pytest.raises(openai.APIError) as raised:
        await read(response(body(event(text("Hel")), failed)))
    assert raised.value.message == "upstream failed"
    assert raised.value.body == {"message": "upstream failed", "code": 502}


async def test_a_body_that_ends_before_the_answer_did_is_a_failed_call() -> None:
    # Neither [DONE] nor a finish reason: cut on the way, not a short answer.
    with pytest.raises(openai.APIError, match="ended before the answer"):
        await read(response(body(event(text("Hel")), event(text("lo")))))
    # A finish reason without [DONE] is a whole answer (some servers never send [DONE]).
    finished = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    written, assembled = await read(response(body(event(text("Hel")), event(finished))))
    assert written == ["Hel"] and assembled.response().finish_reason == "stop"


async def test_a_chunk_that_is_not_json_is_an_unusable_reply() -> None:
    with pytest.raises(openai.APIError):
        await read(response(body(event(text("Hel")), b"data: {oops\n\n")))
    # In one read with chunks that are, or two JSON values in one event: what came before
    # it is still shown, then the call fails.
    for bad in (b"data: {oops\n\n", b"data: {},{}\n\n"):
        written: list[str] = []
        with pytest.raises(openai.APIError, match="not JSON"):
            async for piece in pieces(response(body(event(text("Hel")) + bad)), Assembler("m")):
                written.append(piece)
        assert written == ["Hel"]


async def test_a_chunk_of_another_shape_that_orjson_cannot_read_is_not_json() -> None:
    # msgspec reads a lone surrogate's escape, orjson does not: an odd-shaped chunk with one
    # is a failed call like any chunk that is not JSON, not an error of our own.
    bad = b'data: {"choices": [{"delta": "x"}], "note": "\\ud800"}\n\n'
    written: list[str] = []
    with pytest.raises(openai.APIError, match="not JSON"):
        async for piece in pieces(response(body(event(text("Hel")) + bad)), Assembler("m")):
            written.append(piece)
    assert written == ["Hel"]


async def test_a_chunk_of_another_shape_gives_what_fits_in_it() -> None:
    odd = [
        {"model": "vendor/m", "choices": "none"},
        {"choices": [{"index": 0, "delta": "oops"}, {"index": 0, "delta": {"content": "lo"}}]},
        {"choices": [7, {"index": 1, "delta": {"content": "not ours"}}]},
        {"choices": [{"index": 0, "delta": {"content": 5}, "finish_reason": "stop"}]},
    ]
    written, assembled = await read(response(body(b"".join(map(event, [text("Hel"), *odd])))))
    assert written == ["Hello"]
    answer = assembled.response()
    assert (answer.content, answer.finish_reason) == ("Hello", "stop")


@pytest.mark.parametrize(
    ("lost", "reported"),
    [
        (httpx2.ReadTimeout("no byte in time"), openai.APITimeoutError),
        (httpx2.ReadError("connection reset"), openai.APIConnectionError),
    ],
)
async def test_a_body_cut_short_is_reported_as_the_client_does(
    lost: Exception, reported: type[openai.OpenAIError]
) -> None:
    answer = response(body(event(text("Hel")), error=lost))
    written: list[str] = []
    with pytest.raises(reported) as raised:
        async for piece in pieces(answer, Assembler("m")):
            written.append(piece)
    assert written == ["Hel"] and raised.value.__cause__ is lost
    assert answer.is_closed


async def test_a_connection_lost_after_done_leaves_the_answer_whole() -> None:
    # The provider said [DONE]: what happens to the connection after it is not the answer's.
    answer = response(body(STREAM, error=httpx2.ReadError("connection reset")))
    written, assembled = await read(answer)
    assert written == ["Hello, world"]
    assert assembled.response().content == "Hello, world"
    assert answer.is_closed


async def test_a_connection_kept_open_after_done_does_not_hold_the_answer() -> None:
    async def open_after_done() -> AsyncIterator[bytes]:
        yield STREAM
        await asyncio.Event().wait()  # a proxy that keeps the body open past [DONE]
        yield b""

    answer = response(open_after_done())
    async with asyncio.timeout(5):  # a bound on the test, not a wait: it returns at once
        written, _ = await read(answer)
    assert written == ["Hello, world"]
    assert answer.is_closed
