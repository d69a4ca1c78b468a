"""What goes wrong while a streamed answer's body is read, read off aiohttp's response itself
(llm/pacing.py `Reading`): the real `openai` client against the real FakeLLM server, which
stops writing or drops the connection in the middle of the answer. The turn gets the error a
plain call would (LLMTimeout, LLMUnavailable), after the pieces that came before it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from membot.llm.client import OpenAIChatModel
from membot.llm.errors import LLMError, LLMTimeout, LLMUnavailable
from membot.llm.model import ModelRequest
from tests.conftest import API_KEY
from tests.fakes import FakeLLM, Pacing, Reply

TIMEOUT = 0.5  # seconds: the model's timeout, the longest it may stay silent


@pytest.fixture
async def model(llm: FakeLLM) -> AsyncIterator[OpenAIChatModel]:
    chat_model = OpenAIChatModel(
        api_key=API_KEY, base_url=llm.base_url, model="test/model", timeout=TIMEOUT
    )
    yield chat_model
    await chat_model.close()


async def pieces_then(model: OpenAIChatModel, error: type[LLMError]) -> list[str]:
    pieces: list[str] = []
    with pytest.raises(error):
        async for item in model.stream(ModelRequest([{"role": "user", "content": "hi"}])):
            assert isinstance(item, str)
            pieces.append(item)
    return pieces


async def test_a_provider_silent_mid_answer_is_a_timeout(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    # A piece, then nothing for longer than the timeout (the read timeout, held or not).
    llm.script(Reply(content="x" * 40, pacing=Pacing(chars=8, delay=TIMEOUT * 4)))
    assert "".join(await pieces_then(model, LLMTimeout)) == "x" * 8


async def test_a_connection_dropped_mid_answer_is_a_failed_call(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    llm.script(Reply(content="y" * 80, pacing=Pacing(chars=8, delay=0.02, cut_after=3)))
    pieces = await pieces_then(model, LLMUnavailable)
    assert "".join(pieces) == "y" * 24  # what came before the cut was shown, no more


async def test_the_connection_pool_serves_the_next_call_after_a_cut(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    llm.script(Reply(content="z" * 40, pacing=Pacing(chars=8, cut_after=1)))
    await pieces_then(model, LLMUnavailable)
    llm.script(Reply(content="whole", pacing=Pacing(chars=2)))
    streamed = [
        item async for item in model.stream(ModelRequest([{"role": "user", "content": "again"}]))
    ]
    assert "".join(x for x in streamed if isinstance(x, str)) == "whole"
