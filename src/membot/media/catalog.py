"""Which models see images, and their list prices: OpenRouter's model list
(`GET {OPENROUTER_BASE_URL}/models`), a model seeing images when
`architecture.input_modalities` contains "image", its prices `pricing.prompt` and
`pricing.completion` (per token, as decimal strings). The prices are what a stopped answer,
whose usage the provider never reports, is charged at (usage/estimate.py; the wiring hands
this catalog to the ledger as its price list).

Fetched once at start-up and again every day by the catalog's own task (start()/close()),
kept in memory. While it has never been fetched every model counts as text only (no image
is sent to a model that may refuse it) and has no known price; one WARNING says so per
outage, not per try. A failed refresh keeps the list it had."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import openai
from openai import AsyncOpenAI

from membot.llm.model import Price
from membot.media.provider import provider_failure
from membot.tasks import stopped

log = logging.getLogger(__name__)

DAY = 86_400.0


class ModelCatalog:
    """The input modalities and the list prices of every model the provider lists."""

    def __init__(self, client: AsyncOpenAI, *, refresh_every: float = DAY) -> None:
        self._client = client
        self._refresh_every = refresh_every
        self._modalities: dict[str, frozenset[str]] = {}
        self._prices: dict[str, Price] = {}
        self._fetched = False
        self._failing = False
        self._task: asyncio.Task[None] | None = None

    @property
    def fetched(self) -> bool:
        """Whether the list was fetched at least once (else every model is text only)."""
        return self._fetched

    def sees_images(self, model: str) -> bool:
        return "image" in self.input_modalities(model)

    def input_modalities(self, model: str) -> frozenset[str]:
        """What ``model`` takes; a variant (`vendor/model:free`) as its base model when the
        list does not name the variant; text only for a model the list lacks."""
        found = self._modalities.get(model)
        if found is None and ":" in model:
            found = self._modalities.get(model.split(":", 1)[0])
        return found if found is not None else frozenset({"text"})

    def price(self, model: str) -> Price | None:
        """What ``model`` costs per token; a variant (`vendor/model:nitro`) the list does not
        name as its base model, but not a free one (the base model is not free); None for
        a model the list lacks or lists without a usable price (openrouter/auto's is -1:
        it is the price of whichever model it picks)."""
        found = self._prices.get(model)
        if found is None and ":" in model:
            base, variant = model.split(":", 1)
            found = self._prices.get(base) if variant != "free" else None
        return found

    def vision_models(self, models: Iterable[str]) -> tuple[str, ...]:
        """Those of ``models`` that see images, in their order (what to offer a user whose
        chat model cannot)."""
        return tuple(model for model in models if self.sees_images(model))

    async def start(self) -> None:
        """Fetch the list now (a failure is logged, not raised), then keep it fresh."""
        await self.refresh()
        if self._task is None:
            self._task = asyncio.create_task(self._refresh_daily(), name="membot:model-catalog")

    async def close(self) -> None:
        """Stop refreshing and wait until the task has stopped (cancelled again while it runs
        on: a cancellation can be lost inside the client's request, tasks.stopped)."""
        task, self._task = self._task, None
        if task is not None:
            await stopped(task)

    async def refresh(self) -> bool:
        """Fetch the list once more. True if it was fetched; on failure the old one stays."""
        started = time.perf_counter()
        try:
            reply = await self._client.get("/models", cast_to=object)
            modalities, prices = _parse(reply)
        except openai.OpenAIError as exc:
            self._failed(provider_failure(exc)[1])
            return False
        except ValueError:
            self._failed("unreadable list")
            return False
        self._modalities, self._prices = modalities, prices
        self._fetched = True
        if self._failing:
            log.info("model list: fetched again")
        self._failing = False
        log.info(
            "model list: %d models, %d see images, %d priced, took=%.3fs",
            len(modalities),
            sum(1 for m in modalities.values() if "image" in m),
            len(prices),
            time.perf_counter() - started,
        )
        return True

    def _failed(self, status: str) -> None:
        level = logging.DEBUG if self._failing else logging.WARNING
        self._failing = True
        log.log(
            level,
            "model list: cannot fetch it (%s); %s",
            status,
            "keeping the last one" if self._fetched else "every model counts as text only",
        )

    async def _refresh_daily(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_every)  # a schedule, not a synchronisation
            try:
                await self.refresh()
            except Exception as exc:  # a bug must not end the refreshes for good
                log.error("model list: refresh failed: %s", type(exc).__name__)


def _parse(reply: object) -> tuple[dict[str, frozenset[str]], dict[str, Price]]:
    """`{"data": [{"id", "architecture": {"input_modalities": [...]}, "pricing": {...}}]}` as
    id -> modalities and id -> price (the models with one). Raises ValueError when the reply
    is not such a list."""
    data = reply.get("data") if isinstance(reply, Mapping) else None
    if not isinstance(data, list):
        raise ValueError("no model list")
    out: dict[str, frozenset[str]] = {}
    prices: dict[str, Price] = {}
    for entry in data:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
            continue
        architecture: Any = entry.get("architecture")
        raw = architecture.get("input_modalities") if isinstance(architecture, Mapping) else None
        names = {m for m in raw if isinstance(m, str)} if isinstance(raw, list) else {"text"}
        out[entry["id"]] = frozenset(names or {"text"})
        price = _price(entry.get("pricing"))
        if price is not None:
            prices[entry["id"]] = price
    return out, prices


def _price(pricing: object) -> Price | None:
    """`{"prompt": "0.000001", "completion": "0.000002", ...}` as a Price; None unless both
    are there as non-negative numbers (a router's variable price is "-1")."""
    if not isinstance(pricing, Mapping):
        return None
    try:
        prompt, completion = (Decimal(str(pricing[k])) for k in ("prompt", "completion"))
    except (KeyError, InvalidOperation):
        return None
    if not (prompt.is_finite() and completion.is_finite()) or min(prompt, completion) < 0:
        return None
    return Price(prompt=prompt, completion=completion)
