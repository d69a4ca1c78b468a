"""A streamed answer read a few times a second, not once a chunk (llm/pacing.py): through the
real `openai` client and its aiohttp transport against the real FakeLLM server. Should a new
client version hide the connection, these fail rather than the stream silently costing what
it did before."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest
from openai import AsyncOpenAI, DefaultAioHttpClient

from membot.llm.client import OpenAIChatModel
from membot.llm.model import ModelRequest
from membot.llm.pacing import ramp, reading
from tests.conftest import API_KEY
from tests.fakes import FakeLLM, Pacing, Reply

CHUNKS = 60
GAP = 0.01  # seconds between two chunks: 0.6 s of text, read ~every HOLD
HOLD = 0.1  # the request's (the API's default is longer: fewer reads, a looser bound)


@pytest.fixture
async def model(llm: FakeLLM) -> AsyncIterator[OpenAIChatModel]:
    chat_model = OpenAIChatModel(
        api_key=API_KEY, base_url=llm.base_url, model="test/model", timeout=5.0
    )
    yield chat_model
    await chat_model.close()


async def test_the_clients_streamed_response_can_be_paused(llm: FakeLLM) -> None:
    llm.script(Reply(content="hello"))
    client = AsyncOpenAI(api_key=API_KEY, base_url=llm.base_url, http_client=DefaultAioHttpClient())
    try:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        response = await client.post(
            "/chat/completions", body=body, cast_to=httpx2.Response, stream=True
        )
        assert reading(response) is not None  # else the stream is read a wake-up a chunk
        await response.aclose()
    finally:
        await client.close()
    by_hand = httpx2.Response(200, content=b"data: [DONE]\n\n")
    assert reading(by_hand) is None  # not the client's: read as it comes


async def _pieces(model: OpenAIChatModel, request: ModelRequest) -> list[str]:
    pieces: list[str] = []
    async for item in model.stream(request):
        if isinstance(item, str):
            pieces.append(item)
    return pieces


async def test_a_paced_answer_comes_in_a_few_pieces_whole_and_in_order(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    text = "".join(f"{n:02d}." for n in range(CHUNKS))
    for _ in range(2):  # twice: the connection, paused and resumed, serves the next call
        llm.script(Reply(content=text, pacing=Pacing(chars=3, delay=GAP)))
        request = ModelRequest([{"role": "user", "content": "count"}], hold=HOLD, ramp=True)
        pieces = await _pieces(model, request)
        assert "".join(pieces) == text
        # A read every HOLD, not one a chunk (60 unpaced); a few more as the holds grow.
        assert len(pieces) <= CHUNKS * GAP / HOLD + 8, pieces
        assert len(pieces) >= 2


async def test_without_the_ramp_every_read_after_the_first_words_is_held(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    # An API client's deltas: the first words at once, then a piece a HOLD (the ramp's few
    # quick reads are for a draft that waits for some words; here they only cost CPU).
    text = "".join(f"{n:02d}." for n in range(CHUNKS))
    llm.script(Reply(content=text, pacing=Pacing(chars=3, delay=GAP)))
    pieces = await _pieces(model, ModelRequest([{"role": "user", "content": "n"}], hold=HOLD))
    assert "".join(pieces) == text
    assert pieces[0] == "00."  # the first words are not held
    assert len(pieces) <= CHUNKS * GAP / HOLD + 3, pieces


def test_the_holds_grow_with_the_text_on_the_same_beat() -> None:
    # The words right after the first ones come soon (a draft waits for a few of them);
    # every hold is the full one halved, so all streams still read on its beat.
    assert [ramp(0.5, age) for age in (0.0, 0.05, 0.2, 0.3, 2.0)] == [
        0.03125,
        0.03125,
        0.125,
        0.25,
        0.5,
    ]
