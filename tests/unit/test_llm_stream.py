"""The streamed model call against the real FakeLLM server, through the real openai client:
pieces as they are written, the same LLMResponse as a plain call, errors before and after
the first piece, a consumer that goes away, and what the ledger charges for each."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import API_KEY
from tests.fakes import FakeLLM, Pacing, Reply

from membot.ids import ConversationId
from membot.llm.client import OpenAIChatModel
from membot.llm.errors import LLMRateLimited, LLMUnavailable
from membot.llm.model import LLMResponse, StreamItem
from membot.usage import charged_to
from membot.usage.files import FileLedger
from membot.usage.ledger import MeteredModel

CALL = {"id": "call_1", "type": "function", "function": {"name": "calc", "arguments": '{"x": 6}'}}
CHAT = ConversationId.parse("tg:7")


@pytest.fixture
async def model(llm: FakeLLM) -> AsyncIterator[OpenAIChatModel]:
    chat_model = OpenAIChatModel(
        api_key=API_KEY, base_url=llm.base_url, model="test/model", timeout=5.0
    )
    yield chat_model
    await chat_model.close()


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


async def drain(items: AsyncIterator[StreamItem]) -> tuple[list[str], LLMResponse]:
    pieces: list[str] = []
    async for item in items:
        if isinstance(item, str):
            pieces.append(item)
        else:
            return pieces, item
    raise AssertionError("the stream ended without a response")


async def test_pieces_then_the_same_response_as_a_plain_call(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    llm.price_per_token = "0.001"
    llm.cached_tokens = 3
    text = "Привет! A longer answer, written in many pieces."
    llm.script(Reply(content=text), Reply(content=text))
    plain = await model.complete(user("hi"))
    pieces, streamed = await drain(model.stream(user("hi")))
    assert len(pieces) > 3 and "".join(pieces) == text
    assert streamed == plain  # content, model, finish reason, usage (tokens, cached, cost)
    assert streamed.usage.cost is not None and streamed.usage.cached_tokens == 3
    body = llm.requests[1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_tool_calls_are_put_together(llm: FakeLLM, model: OpenAIChatModel) -> None:
    second = {**CALL, "id": "call_2", "function": {"name": "note", "arguments": '{"t": "ü"}'}}
    reply = Reply(content="Let me check.", tool_calls=[CALL, second])
    llm.script(reply, reply)
    plain = await model.complete(user("6?"))
    pieces, streamed = await drain(model.stream(user("6?")))
    assert "".join(pieces) == "Let me check."
    assert streamed.tool_calls == plain.tool_calls and len(streamed.tool_calls) == 2
    assert streamed.finish_reason == "tool_calls"


async def test_an_error_before_the_first_piece(llm: FakeLLM, model: OpenAIChatModel) -> None:
    llm.script(Reply(status=429))
    with pytest.raises(LLMRateLimited):
        await drain(model.stream(user("hi")))


async def test_an_error_in_the_middle_of_the_stream(llm: FakeLLM, model: OpenAIChatModel) -> None:
    llm.script(Reply(content="x" * 80, pacing=Pacing(fail_after=3)))
    pieces: list[str] = []
    with pytest.raises(LLMUnavailable):
        async for item in model.stream(user("hi")):
            assert isinstance(item, str)
            pieces.append(item)
    assert pieces  # some of the answer came before the error


async def test_closing_the_stream_closes_the_providers_response(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    llm.script(Reply(content="y" * 400, pacing=Pacing(delay=0.05)))
    async with aclosing(model.stream(user("hi"))) as items:
        first = await anext(items)
        assert first == "yyyyyyyy"
    await llm.wait_until(lambda: llm.streams_gone == 1, what="the client to go away")
    await llm.wait_until(lambda: llm.in_flight == 0, what="the handler to end")


async def test_cancelling_the_consumer_closes_the_stream(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    llm.script(Reply(content="z" * 400, pacing=Pacing(delay=0.05)))
    started = asyncio.Event()

    async def consume() -> None:
        async with aclosing(model.stream(user("hi"))) as items:
            async for _ in items:
                started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await llm.wait_until(lambda: llm.streams_gone == 1, what="the client to go away")


async def test_a_streamed_call_is_charged_like_a_plain_one(
    llm: FakeLLM, model: OpenAIChatModel, tmp_path: Path
) -> None:
    llm.price_per_token = "0.01"
    ledger = FileLedger(tmp_path)
    metered = MeteredModel(model, ledger, lambda: datetime(2026, 11, 25, tzinfo=UTC))
    llm.script(Reply(content="answer one"), Reply(content="answer one"))
    with charged_to(7, CHAT):
        await metered.complete(user("hi"))
        _, streamed = await drain(metered.stream(user("hi")))
    totals = await ledger.totals("user", "7", "2026-11")
    assert totals.calls == 2 and totals.cost == 2 * (streamed.usage.cost or Decimal(0))
    assert totals.prompt_tokens == 2 * streamed.usage.prompt_tokens


async def test_a_stream_stopped_early_is_charged_an_estimate_without_cost(
    llm: FakeLLM, model: OpenAIChatModel, tmp_path: Path
) -> None:
    """The provider reports usage in the last chunk only; it bills what it generated all
    the same: tokens are estimated (about 4 characters each), the cost is unknown."""
    llm.price_per_token = "0.01"
    ledger = FileLedger(tmp_path)
    metered = MeteredModel(model, ledger, lambda: datetime(2026, 11, 25, tzinfo=UTC))
    llm.script(Reply(content="w" * 400, pacing=Pacing(delay=0.05)))
    with charged_to(7, CHAT):
        async with aclosing(metered.stream(user("x" * 40))) as items:
            assert await anext(items) == "w" * 8
    await llm.wait_until(lambda: llm.streams_gone == 1, what="the client to go away")
    totals = await ledger.totals("user", "7", "2026-11")
    assert (totals.calls, totals.unpriced, totals.cost) == (1, 1, 0)
    assert (totals.prompt_tokens, totals.completion_tokens) == (10, 2)


async def test_a_stream_closed_before_its_first_piece_is_charged_nothing(
    llm: FakeLLM, model: OpenAIChatModel, tmp_path: Path
) -> None:
    ledger = FileLedger(tmp_path)
    metered = MeteredModel(model, ledger, lambda: datetime(2026, 11, 25, tzinfo=UTC))
    llm.script(Reply(content="w" * 400, pacing=Pacing(first_delay=30)))
    with charged_to(7, CHAT):
        task = asyncio.create_task(anext(metered.stream(user("hi"))))
        await llm.wait_for_in_flight(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert (await ledger.totals("user", "7", "2026-11")).calls == 0
