"""A turn that raises a connection error of its own (ConnectionResetError from something it
talks to) while its client is still connected: the client is told, as for any other failure
of the turn, and is not taken for gone. Before the stream opens that is the usual JSON error
(/v1: OpenAI's shape); after it, the stream's error event, what was streamed before it kept.

No path of the real turn lets such an error out (the model client, the tools and the storage
translate theirs), so the turn here is a handler added to the real server: the real
ApiServer's envelope and /v1 error shape, the real streams (api/stream.py, api/v1/stream.py)
and the real `streamed` boundary, over a real connection from a real client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from membot.api.server import ApiServer
from membot.api.stream import EventStream, streamed
from membot.api.v1.stream import ChunkStream
from membot.config import Settings
from membot.wiring import build_core
from tests.api_support import free_port, parse_events

PARTIAL = "the first words"


def _route(
    make_stream: Callable[[web.Request], EventStream | ChunkStream], write_first: bool
) -> Callable[[web.Request], Any]:
    async def handler(request: web.Request) -> web.StreamResponse:
        stream = make_stream(request)

        async def answer() -> web.StreamResponse:
            if write_first:
                await stream.delta(PARTIAL)
            # What a turn's own connection (to the model, a tool, the storage) raises.
            raise ConnectionResetError(104, "Connection reset by peer")

        return await streamed(request, stream, answer)

    return handler


@pytest.fixture
async def base_url(make_settings: Callable[..., Settings]) -> AsyncIterator[str]:
    settings = make_settings(api_port=free_port(), api_tokens="test-api-token-0123456789")
    core = build_core(settings)
    server = ApiServer(settings, core)
    router = server.app.router
    for opened in (False, True):
        suffix = "-open" if opened else ""
        router.add_post(f"/api/test-turn{suffix}", _route(EventStream, opened))
        router.add_post(
            f"/v1/test-turn{suffix}",
            _route(lambda r: ChunkStream(r, "chatcmpl-test", 0, "test/model", False), opened),
        )
    await server.start()
    try:
        yield server.url
    finally:
        await server.stop_accepting()
        await server.close()
        await core.aclose()


async def _post(url: str) -> tuple[int, str, bytes]:
    async with aiohttp.ClientSession() as http, http.post(url) as response:
        return response.status, response.content_type, await response.read()


async def test_api_before_the_stream_opens_is_a_json_internal_error(base_url: str) -> None:
    status, kind, raw = await _post(base_url + "/api/test-turn")
    assert (status, kind) == (500, "application/json")
    assert json.loads(raw)["code"] == "INTERNAL_ERROR"


async def test_v1_before_the_stream_opens_is_an_openai_shaped_error(base_url: str) -> None:
    status, kind, raw = await _post(base_url + "/v1/test-turn")
    assert (status, kind) == (500, "application/json")
    error = json.loads(raw)["error"]
    assert error["code"] == "internal_error"
    assert error["message"]


async def test_api_once_open_ends_with_an_error_event_after_what_was_streamed(
    base_url: str,
) -> None:
    status, kind, raw = await _post(base_url + "/api/test-turn-open")
    assert (status, kind) == (200, "text/event-stream")
    events = parse_events(raw)
    assert events[0] == ("delta", {"content": PARTIAL})
    assert events[-1][0] == "error"
    assert events[-1][1]["code"] == "INTERNAL_ERROR"


async def test_v1_once_open_ends_with_an_error_chunk_and_no_done(base_url: str) -> None:
    status, kind, raw = await _post(base_url + "/v1/test-turn-open")
    assert (status, kind) == (200, "text/event-stream")
    datas = [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert json.loads(datas[0])["choices"][0]["delta"]["content"] == PARTIAL
    assert json.loads(datas[-1])["error"]["code"] == "internal_error"
    assert "[DONE]" not in datas
