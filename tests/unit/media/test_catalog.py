"""Which models see images, read from the fake OpenRouter's model list: at start, daily, and
what happens while the list cannot be had."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from decimal import Decimal

import httpx2
import pytest
from openai import AsyncOpenAI

from membot.llm.model import Price
from membot.media.catalog import ModelCatalog
from membot.media.provider import provider_client
from membot.tasks import stopped
from tests.fakes import FakeLLM
from tests.unit.conftest import llm_settings
from tests.unit.media.test_transcribe import KEY

MODELS = {
    "openai/gpt-4o-mini": ["text", "image", "file"],
    "meta/llama-text": ["text"],
    "google/gemma:free": ["text"],
    "google/gemma": ["text", "image"],
    "vendor/odd": [],
}


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM(api_key=KEY) as server:
        server.models = dict(MODELS)
        yield server


@pytest.fixture
async def client(llm: FakeLLM) -> AsyncIterator[AsyncOpenAI]:
    client = provider_client(llm_settings(llm.base_url, KEY))
    yield client
    await client.close()


async def test_models_that_see_images_are_known_after_start(client: AsyncOpenAI) -> None:
    catalog = ModelCatalog(client)
    await catalog.start()
    try:
        assert catalog.fetched
        assert catalog.sees_images("openai/gpt-4o-mini")
        assert not catalog.sees_images("meta/llama-text")
        # A listed variant as listed; an unlisted one as its base model.
        assert not catalog.sees_images("google/gemma:free")
        assert catalog.sees_images("openai/gpt-4o-mini:nitro")
        assert not catalog.sees_images("unknown/model") and not catalog.sees_images("vendor/odd")
        offered = ("meta/llama-text", "google/gemma", "openai/gpt-4o-mini")
        assert catalog.vision_models(offered) == ("google/gemma", "openai/gpt-4o-mini")
    finally:
        await catalog.close()


async def test_without_the_list_every_model_is_text_only_warned_once(
    llm: FakeLLM, client: AsyncOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    llm.models_status = 503
    catalog = ModelCatalog(client)
    with caplog.at_level(logging.DEBUG, logger="membot"):
        await catalog.start()
        assert not await catalog.refresh() and not await catalog.refresh()
    await catalog.close()
    assert not catalog.fetched and not catalog.sees_images("openai/gpt-4o-mini")
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "model list: cannot fetch it (http 503); every model counts as text only"
    ]
    assert KEY not in caplog.text and llm.model_list_requests == 3

    # The provider is back: the next refresh knows the models.
    llm.models_status = 200
    assert await catalog.refresh() and catalog.sees_images("openai/gpt-4o-mini")


async def test_a_failed_refresh_keeps_the_list_it_had(llm: FakeLLM, client: AsyncOpenAI) -> None:
    catalog = ModelCatalog(client)
    assert await catalog.refresh()
    llm.models_status = 500
    assert not await catalog.refresh()
    assert catalog.sees_images("openai/gpt-4o-mini")
    await llm.stop()
    assert not await catalog.refresh()
    assert catalog.sees_images("openai/gpt-4o-mini")


async def test_the_list_is_refreshed_by_its_own_task_until_closed(
    llm: FakeLLM, client: AsyncOpenAI
) -> None:
    catalog = ModelCatalog(client, refresh_every=0.01)
    await catalog.start()
    assert not catalog.sees_images("new/vision-model")
    llm.models["new/vision-model"] = ["image", "text"]
    # Each refresh asks only after the one before was taken in: the third request means
    # the second answer, made after the model was added, is known.
    await llm.wait_until(lambda: llm.model_list_requests >= 3, what="two refreshes")
    assert catalog.sees_images("new/vision-model")
    await catalog.close()
    await catalog.close()  # closing twice is harmless
    assert not any(t.get_name() == "membot:model-catalog" for t in asyncio.all_tasks())


async def test_an_empty_list_means_text_only(llm: FakeLLM, client: AsyncOpenAI) -> None:
    catalog = ModelCatalog(client)
    llm.models = {}
    assert await catalog.refresh() and not catalog.sees_images("openai/gpt-4o-mini")


async def test_list_prices_are_known_per_token_exactly(llm: FakeLLM, client: AsyncOpenAI) -> None:
    """What a stopped answer is charged at: OpenRouter's per-token prices, decimal strings."""
    llm.prices = {
        "openai/gpt-4o-mini": ("0.00000015", "0.0000006"),
        "google/gemma:free": ("0", "0"),
        "vendor/odd": ("", "n/a"),  # unreadable: no price, the rest of the list still read
        "openrouter/auto": ("-1", "-1"),  # a router: the price of whichever model it picks
    }
    llm.models["openrouter/auto"] = ["text", "image"]
    catalog = ModelCatalog(client)
    assert catalog.price("openai/gpt-4o-mini") is None  # not fetched yet: unknown
    assert await catalog.refresh()
    mini = catalog.price("openai/gpt-4o-mini")
    assert mini is not None and mini.of(1000, 100) == Decimal("0.00021")
    assert catalog.price("meta/llama-text") == Price(Decimal("0.000001"), Decimal("0.000002"))
    free = catalog.price("google/gemma:free")
    assert free is not None and free.of(10**6, 10**6) == 0
    # An unlisted variant as its base model, but not an unlisted free one.
    assert catalog.price("openai/gpt-4o-mini:nitro") == mini
    assert catalog.price("meta/llama-text:free") is None
    assert catalog.price("vendor/odd") is None and not catalog.sees_images("vendor/odd")
    assert catalog.price("openrouter/auto") is None and catalog.sees_images("openrouter/auto")
    assert catalog.price("unknown/model") is None


class _WaitForTransport(httpx2.AsyncHTTPTransport):
    """Real HTTP, each request inside an asyncio.wait_for (as some libraries send theirs):
    on Python 3.11 a cancellation that comes as the request has just been answered is lost
    there. `answered` is set at that moment."""

    def __init__(self) -> None:
        super().__init__()
        self.answered = asyncio.Event()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        send = super().handle_async_request

        async def answered() -> httpx2.Response:
            response = await send(request)
            self.answered.set()
            return response

        return await asyncio.wait_for(answered(), 10.0)


async def test_closing_stops_the_refreshes_even_when_a_cancellation_is_lost(
    llm: FakeLLM,
) -> None:
    transport = _WaitForTransport()
    client = AsyncOpenAI(
        api_key=KEY,
        base_url=llm.base_url,
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=transport),
    )
    catalog = ModelCatalog(client, refresh_every=0.01)
    closing: asyncio.Task[None] | None = None
    try:
        await catalog.start()
        transport.answered.clear()
        # Closed the moment a refresh of its own task has been answered: the cancellation
        # is lost in the wait_for, and the loop would run on with its owner waiting for it.
        await transport.answered.wait()
        # Not under asyncio.timeout: its cancellation, passed on to the loop, would stop it.
        closing = asyncio.create_task(catalog.close())
        await asyncio.wait({closing}, timeout=5)
        assert closing.done(), "the refreshes ran on after close()"
        assert not any(t.get_name() == "membot:model-catalog" for t in asyncio.all_tasks())
    finally:
        if closing is not None:
            await stopped(closing)
        await client.close()
