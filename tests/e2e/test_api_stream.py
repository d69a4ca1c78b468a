"""End to end: `"stream": true` in POST /api/chat, over the real HTTP API and core, against the
fake LLM streaming through the real openai client: deltas then a `done` equal to the plain
answer, errors before the first byte (JSON) and after it (an `error` event, nothing stored),
and a client that goes away mid-answer (the model's stream is closed, nothing is stored, the
round is not counted)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from tests import api_support
from tests.api_support import API_TOKEN, RunningApi, StartApi, parse_events
from tests.fakes import FakeLLM, Pacing, Reply

start_api = api_support.start_api

ANSWER = "Для новичка: хаммер 2×10 кг, бабочка 20 кг — три подхода по 12 повторений."


@pytest.fixture
async def api(start_api: StartApi) -> RunningApi:
    return await start_api()


async def open_session(api: RunningApi, llm: FakeLLM) -> str:
    llm.script("Which exercises?")
    answer = await api.client.chat({"message": "help me plan", "maxRounds": 3})
    assert answer.status == 200, answer.body
    return str(answer.body["sessionId"])


async def raw_stream(api: RunningApi, message: str) -> bytes:
    """The bytes of a streamed /api/chat answer, as they came over the wire."""
    async with api.client.http.post(
        api.client.base_url + "/api/chat",
        json={"message": message, "stream": True},
        headers={"Authorization": f"Bearer {API_TOKEN}"},
    ) as response:
        return await response.read()


def deltas(events: list[tuple[str, Any]]) -> list[str]:
    return [data["content"] for kind, data in events if kind == "delta"]


async def test_deltas_then_done_equal_to_the_plain_answer(api: RunningApi, llm: FakeLLM) -> None:
    # Written a piece at a time over 1.5 s: it comes in several deltas (read every 0.4 s).
    llm.script(ANSWER, Reply(content=ANSWER, pacing=Pacing(chars=8, delay=0.15)))
    plain = await api.client.chat({"message": "Помоги подобрать веса"})
    streamed = await api.client.chat({"message": "Помоги подобрать веса", "stream": True})
    assert streamed.status == 200
    assert streamed.headers["Content-Type"] == "text/event-stream; charset=utf-8"
    pieces = deltas(streamed.events)
    assert len(pieces) > 3 and "".join(pieces) == ANSWER
    assert [kind for kind, _ in streamed.events] == ["delta"] * len(pieces) + ["done"]
    done = streamed.body
    assert set(done) == set(plain.body)
    assert {**done, "sessionId": None} == {**plain.body, "sessionId": None}
    assert api.stored(done["sessionId"])[-1]["content"] == ANSWER
    assert llm.streams == 1


async def test_utf8_on_the_wire(api: RunningApi, llm: FakeLLM) -> None:
    llm.script(ANSWER)
    raw = await raw_stream(api, "веса")
    assert b"\\u" not in raw and "хаммер".encode() in raw


async def test_a_delta_is_one_line_of_json_whatever_the_text(api: RunningApi, llm: FakeLLM) -> None:
    # Line breaks, quotes, backslashes, control characters, a line separator, an emoji.
    text = 'a "quoted"\\path\nnew line\r\ttab \x01 \u2028 ок 😀 end'
    llm.script(Reply(content=text, pacing=Pacing(chars=3, delay=0.15)))
    raw = await raw_stream(api, "odd text")
    blocks = [b for b in raw.split(b"\n\n") if b.startswith(b"event: delta\n")]
    assert len(blocks) > 3
    pieces = []
    for block in blocks:
        _, data = block.split(b"\n")  # one data line: every line break in the text escaped
        assert data.startswith(b"data: ")
        piece = json.loads(data[6:])["content"]
        # The very bytes of json.dumps: UTF-8 as is, the usual separators.
        assert data[6:] == json.dumps({"content": piece}, ensure_ascii=False).encode()
        pieces.append(piece)
    assert "".join(pieces) == text


async def test_a_session_round_streams(api: RunningApi, llm: FakeLLM) -> None:
    sid = await open_session(api, llm)
    llm.script(ANSWER)
    streamed = await api.client.chat({"message": "hammer", "sessionId": sid, "stream": True})
    assert streamed.body["round"] == 2 and streamed.body["content"] == ANSWER
    assert "".join(deltas(streamed.events)) == ANSWER


async def test_errors_before_the_first_byte_are_json(api: RunningApi, llm: FakeLLM) -> None:
    llm.script(Reply(status=429))
    refused = await api.client.chat({"message": "hi", "stream": True})
    assert (refused.status, refused.code) == (429, "LLM_RATE_LIMITED")
    assert refused.headers["Content-Type"].startswith("application/json")
    unknown = "3f1e9a52-7c41-4b8e-9d0a-52c6e1f0b7aa"
    missing = await api.client.chat({"message": "hi", "sessionId": unknown, "stream": True})
    assert (missing.status, missing.code) == (404, "SESSION_NOT_FOUND")
    bad = await api.client.chat({"message": "hi", "stream": "yes"})
    assert (bad.status, bad.code) == (400, "INVALID_REQUEST")


async def test_an_error_mid_stream_is_an_event_and_nothing_is_stored(
    api: RunningApi, llm: FakeLLM
) -> None:
    sid = await open_session(api, llm)
    before = api.stored(sid)
    llm.script(Reply(content=ANSWER, pacing=Pacing(fail_after=3)))
    failed = await api.client.chat({"message": "hammer", "sessionId": sid, "stream": True})
    assert failed.status == 200 and deltas(failed.events)
    assert failed.events[-1] == (
        "error",
        {"error": "The model provider is unavailable right now.", "code": "LLM_UNAVAILABLE"},
    )
    assert api.stored(sid) == before
    llm.script("Round two, again.")
    again = await api.client.chat({"message": "hammer", "sessionId": sid})
    assert (again.status, again.body["round"]) == (200, 2)


async def test_a_client_gone_mid_stream_cancels_the_call_and_counts_no_round(
    start_api: StartApi, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="membot.api")
    # A model allowed to think long (LLM_TIMEOUT), so that only the client's going ends it.
    api = await start_api(llm_timeout=300.0)
    sid = await open_session(api, llm)
    before = api.stored(sid)
    # The model writes its first word at once, then thinks for two minutes: the client's
    # going must be noticed in that pause, not at the next write.
    llm.script(Reply(content="слово " * 400, pacing=Pacing(chars=6, delay=120.0)))
    body = {"message": "hammer", "sessionId": sid, "stream": True}
    async with api.client.http.post(
        api.client.base_url + "/api/chat",
        json=body,
        headers={"Authorization": f"Bearer {API_TOKEN}"},
    ) as response:
        assert response.status == 200
        seen = b""
        while b"event: delta" not in seen:
            seen += await response.content.readany()
        assert parse_events(seen.split(b"\n\n")[0] + b"\n\n")[0][0] == "delta"
        response.close()  # the client goes away mid-answer
    await llm.wait_until(lambda: llm.streams_gone == 1, what="the model's stream to be closed")
    # Closed before the model wrote another piece: its role chunk and first word, no more.
    assert llm.chunks_sent == 2
    assert await api.core.service.wait_idle(5.0)
    assert api.stored(sid) == before
    llm.script("Round two, after all.")
    again = await api.client.chat({"message": "hammer", "sessionId": sid})
    assert (again.status, again.body["round"]) == (200, 2)
    # One log line for the request that went away (its stream had opened: 200).
    [line] = [r.getMessage() for r in caplog.records if "code=CLIENT_GONE" in r.getMessage()]
    assert "status=200" in line


async def test_a_client_gone_before_a_plain_answer_cancels_the_call_too(
    start_api: StartApi, llm: FakeLLM
) -> None:
    api = await start_api(llm_timeout=300.0)  # only the client's going ends the call
    sid = await open_session(api, llm)
    before = api.stored(sid)
    llm.script(Reply(content="never sent", hang=True))  # the model would answer never
    body = {"message": "hammer", "sessionId": sid}
    request = asyncio.ensure_future(
        api.client.http.post(
            api.client.base_url + "/api/chat",
            json=body,
            headers={"Authorization": f"Bearer {API_TOKEN}"},
        )
    )
    await llm.wait_for_in_flight(1)
    request.cancel()  # the client gives up: its connection closes
    with pytest.raises(asyncio.CancelledError):
        await request
    # The model's call was closed with it (the fake's handler saw its client go).
    await llm.wait_until(lambda: llm.in_flight == 0, what="the model's call to be closed")
    assert await api.core.service.wait_idle(5.0)
    assert api.stored(sid) == before
    llm.script("Round two, after all.")
    again = await api.client.chat({"message": "hammer", "sessionId": sid})
    assert (again.status, again.body["round"]) == (200, 2)
