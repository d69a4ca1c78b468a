"""The streamed model call against the real FakeLLM server, through the real openai client:
pieces as they are written, the same LLMResponse as a plain call, errors before and after
the first piece, a consumer that goes away, and what the ledger charges for each."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable
from contextlib import aclosing
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from membot.ids import ConversationId
from membot.llm.client import OpenAIChatModel
from membot.llm.errors import LLMRateLimited, LLMUnavailable
from membot.llm.model import (
    CallOptions,
    LLMResponse,
    ModelRequest,
    Source,
    StreamItem,
    StreamNotes,
)
from membot.media.catalog import ModelCatalog
from membot.media.provider import provider_client
from membot.usage import charged_to
from membot.usage.files import FileLedger
from membot.usage.metered import MeteredModel
from tests.conftest import API_KEY
from tests.fakes import FakeLLM, Pacing, Reply
from tests.unit.conftest import llm_settings

CALL = {"id": "call_1", "type": "function", "function": {"name": "calc", "arguments": '{"x": 6}'}}
CHAT = ConversationId.parse("tg:7")


def today() -> datetime:
    """The ledger's clock."""
    return datetime(2026, 11, 25, tzinfo=UTC)


@pytest.fixture
async def model(llm: FakeLLM) -> AsyncIterator[OpenAIChatModel]:
    chat_model = OpenAIChatModel(
        api_key=API_KEY, base_url=llm.base_url, model="test/model", timeout=5.0
    )
    yield chat_model
    await chat_model.close()


@pytest.fixture
async def catalog(llm: FakeLLM) -> AsyncIterator[ModelCatalog]:
    """The provider's model list (not fetched until a test refreshes it)."""
    llm.models = {"test/model": ["text"]}
    client = provider_client(llm_settings(llm.base_url, API_KEY))
    yield ModelCatalog(client)
    await client.close()


def ask(text: str, options: CallOptions | None = None) -> ModelRequest:
    """A request of one user message."""
    return ModelRequest([{"role": "user", "content": text}]).with_options(options)


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
    plain = await model.complete(ask("hi"))
    pieces, streamed = await drain(model.stream(ask("hi")))
    assert pieces and "".join(pieces) == text
    assert streamed == plain  # content, model, finish reason, usage (tokens, cached, cost)
    assert streamed.usage.cost is not None and streamed.usage.cached_tokens == 3
    body = llm.requests[1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_tool_calls_are_put_together(llm: FakeLLM, model: OpenAIChatModel) -> None:
    second = {**CALL, "id": "call_2", "function": {"name": "note", "arguments": '{"t": "ü"}'}}
    reply = Reply(content="Let me check.", tool_calls=[CALL, second])
    llm.script(reply, reply)
    plain = await model.complete(ask("6?"))
    pieces, streamed = await drain(model.stream(ask("6?")))
    assert "".join(pieces) == "Let me check."
    assert streamed.tool_calls == plain.tool_calls and len(streamed.tool_calls) == 2
    assert streamed.finish_reason == "tool_calls"


async def test_an_error_before_the_first_piece(llm: FakeLLM, model: OpenAIChatModel) -> None:
    llm.script(Reply(status=429))
    with pytest.raises(LLMRateLimited):
        await drain(model.stream(ask("hi")))


async def test_an_error_in_the_middle_of_the_stream(llm: FakeLLM, model: OpenAIChatModel) -> None:
    llm.script(Reply(content="x" * 80, pacing=Pacing(fail_after=3)))
    pieces: list[str] = []
    with pytest.raises(LLMUnavailable):
        async for item in model.stream(ask("hi")):
            assert isinstance(item, str)
            pieces.append(item)
    assert pieces  # some of the answer came before the error


async def test_closing_the_stream_closes_the_providers_response(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    llm.script(Reply(content="y" * 400, pacing=Pacing(delay=0.05)))
    async with aclosing(model.stream(ask("hi"))) as items:
        first = await anext(items)
        assert first == "yyyyyyyy"
    await llm.wait_until(lambda: llm.streams_gone == 1, what="the client to go away")
    await llm.wait_until(lambda: llm.in_flight == 0, what="the handler to end")


async def test_a_stream_closed_early_tells_what_it_cited_so_far(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    pages = [("https://a.example/", "A"), ("https://b.example/", "B")]
    # The first citation rides on the first piece, the second on the last (tests/fakes).
    llm.script(Reply(content="y" * 400, pacing=Pacing(delay=0.05), sources=pages))
    notes = StreamNotes()
    async with aclosing(model.stream(ask("hi"), notes)) as items:
        await anext(items)
    assert notes.sources == (Source("https://a.example/", "A"),)


async def test_cancelling_the_consumer_closes_the_stream(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    llm.script(Reply(content="z" * 400, pacing=Pacing(delay=0.05)))
    started = asyncio.Event()

    async def consume() -> None:
        async with aclosing(model.stream(ask("hi"))) as items:
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
        await metered.complete(ask("hi"))
        _, streamed = await drain(metered.stream(ask("hi")))
    totals = await ledger.totals("user", "7", "2026-11")
    assert totals.calls == 2 and totals.cost == 2 * (streamed.usage.cost or Decimal(0))
    assert totals.prompt_tokens == 2 * streamed.usage.prompt_tokens


async def stop_after_first_piece(
    llm: FakeLLM, metered: MeteredModel, *, reply: Reply | None = None, asked: str | None = None
) -> None:
    """A 40-character prompt (10 tokens), closed after its first piece of 8 (2 tokens)."""
    llm.script(reply or Reply(content="w" * 400, pacing=Pacing(delay=0.05)))
    gone = llm.streams_gone
    with charged_to(7, CHAT):
        stream = metered.stream(ask("x" * 40, CallOptions(model=asked)))
        async with aclosing(stream) as items:
            assert await anext(items) == "w" * 8
    await llm.wait_until(lambda: llm.streams_gone == gone + 1, what="the client to go away")


async def test_a_stream_stopped_early_is_charged_an_estimate_at_the_list_price(
    llm: FakeLLM, model: OpenAIChatModel, catalog: ModelCatalog, tmp_path: Path
) -> None:
    """The provider reports usage in the last chunk only; it bills what it generated all
    the same: tokens are estimated (about 4 characters each), priced at the model's list
    price (the provider's model list), and the charge is marked as estimated."""
    llm.price_per_token = "0.01"  # what the provider would report: not reported here
    llm.prices = {"test/model": ("0.0000015", "0.000006")}
    await catalog.refresh()
    ledger = FileLedger(tmp_path)
    metered = MeteredModel(model, ledger, today, prices=catalog)
    await stop_after_first_piece(llm, metered)
    totals = await ledger.totals("user", "7", "2026-11")
    assert (totals.calls, totals.estimated, totals.unpriced) == (1, 1, 0)
    assert (totals.prompt_tokens, totals.completion_tokens) == (10, 2)
    assert totals.cost == Decimal("0.000027")  # 10 x 0.0000015 + 2 x 0.000006, exactly
    assert (await ledger.totals("chat", str(CHAT), "2026-11-25")).cost == totals.cost


async def test_without_a_price_the_estimate_is_unpriced(
    llm: FakeLLM, model: OpenAIChatModel, catalog: ModelCatalog, tmp_path: Path
) -> None:
    """The list not fetched yet (or no list at all), or a model it lacks: tokens only."""
    ledger = FileLedger(tmp_path)
    await stop_after_first_piece(llm, MeteredModel(model, ledger, today))
    await stop_after_first_piece(llm, MeteredModel(model, ledger, today, prices=catalog))
    llm.models = {"other/model": ["text"]}
    await catalog.refresh()
    await stop_after_first_piece(llm, MeteredModel(model, ledger, today, prices=catalog))
    totals = await ledger.totals("user", "7", "2026-11")
    assert (totals.calls, totals.estimated, totals.unpriced, totals.cost) == (3, 3, 3, 0)


@pytest.mark.parametrize(
    ("listed", "charged"),
    [
        # The model the router picked, named in the stream, at its price.
        ({"vendor/picked": ("0.00001", "0.00002")}, ("vendor/picked", "0.00014")),
        # The picked one unknown: the one asked for, if it has a price.
        ({"openrouter/auto": ("0.000001", "0.000001")}, ("openrouter/auto", "0.000012")),
        # Neither: unpriced, recorded as the model that wrote it.
        ({}, ("vendor/picked", None)),
    ],
)
async def test_a_router_stopped_early_is_charged_at_the_model_it_picked(
    llm: FakeLLM,
    model: OpenAIChatModel,
    catalog: ModelCatalog,
    tmp_path: Path,
    listed: dict[str, tuple[str, str]],
    charged: tuple[str, str | None],
) -> None:
    llm.models = {"openrouter/auto": ["text"], **{m: ["text"] for m in listed}}
    llm.prices = {"openrouter/auto": ("-1", "-1"), **listed}  # OpenRouter's: variable
    await catalog.refresh()
    ledger = FileLedger(tmp_path)
    metered = MeteredModel(model, ledger, today, prices=catalog)
    reply = Reply(content="w" * 400, model="vendor/picked", pacing=Pacing(delay=0.05))
    await stop_after_first_piece(llm, metered, reply=reply, asked="openrouter/auto")
    assert llm.chat_requests[-1]["model"] == "openrouter/auto"
    await ledger.close()
    [line] = (tmp_path / "usage.jsonl").read_text().splitlines()
    row = json.loads(line)
    assert (row["model"], row.get("cost"), row["estimated"]) == (*charged, True)


async def cancel_once_sent(llm: FakeLLM, call: Awaitable[object]) -> None:
    """Run `call` (a 40-character prompt: 10 tokens) until the provider has the request,
    then cancel it, as a front door does when its user stops or its client goes away."""
    with charged_to(7, CHAT):
        task = asyncio.ensure_future(call)
        await llm.wait_for_in_flight(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    await llm.wait_until(lambda: llm.in_flight == 0, what="the model's call to be closed")


async def test_a_stream_closed_before_its_first_piece_is_charged_its_prompt(
    llm: FakeLLM, model: OpenAIChatModel, catalog: ModelCatalog, tmp_path: Path
) -> None:
    """The provider bills the prompt of a request it received, however early it is left:
    Stop pressed at once is no way around a budget."""
    llm.prices = {"test/model": ("0.0000015", "0.000006")}
    await catalog.refresh()
    ledger = FileLedger(tmp_path)
    metered = MeteredModel(model, ledger, today, prices=catalog)
    llm.script(Reply(content="w" * 400, pacing=Pacing(first_delay=30)))
    await cancel_once_sent(llm, anext(metered.stream(ask("x" * 40))))
    totals = await ledger.totals("user", "7", "2026-11")
    assert (totals.calls, totals.estimated, totals.unpriced) == (1, 1, 0)
    assert (totals.prompt_tokens, totals.completion_tokens) == (10, 0)
    assert totals.cost == Decimal("0.000015")  # 10 x 0.0000015
    assert (await ledger.totals("chat", str(CHAT), "2026-11-25")).cost == totals.cost


async def test_a_plain_call_cancelled_once_sent_is_charged_its_prompt(
    llm: FakeLLM, model: OpenAIChatModel, catalog: ModelCatalog, tmp_path: Path
) -> None:
    llm.prices = {"test/model": ("0.0000015", "0.000006")}
    await catalog.refresh()
    ledger = FileLedger(tmp_path)
    metered = MeteredModel(model, ledger, today, prices=catalog)
    llm.script(Reply(content="never sent", hang=True))
    await cancel_once_sent(llm, metered.complete(ask("x" * 40)))
    totals = await ledger.totals("user", "7", "2026-11")
    assert (totals.calls, totals.estimated, totals.unpriced) == (1, 1, 0)
    assert (totals.prompt_tokens, totals.completion_tokens, totals.cost) == (
        10,
        0,
        Decimal("0.000015"),
    )


async def test_a_call_the_provider_failed_is_charged_nothing(
    llm: FakeLLM, model: OpenAIChatModel, tmp_path: Path
) -> None:
    """An error instead of an answer (a 503 to a plain call and to a stream, a stream that
    breaks after some text): the provider bills none, so neither does membot."""
    ledger = FileLedger(tmp_path)
    metered = MeteredModel(model, ledger, today)
    broken = Reply(content="x" * 80, pacing=Pacing(fail_after=3))
    llm.script(Reply(status=503), Reply(status=503), broken)
    with charged_to(7, CHAT):
        with pytest.raises(LLMUnavailable):
            await metered.complete(ask("hi"))
        for _ in range(2):
            with pytest.raises(LLMUnavailable):
                await drain(metered.stream(ask("hi")))
    assert (await ledger.totals("user", "7", "2026-11")).calls == 0
