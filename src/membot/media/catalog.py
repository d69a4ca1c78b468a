"""Which models see images: OpenRouter's model list (`GET {OPENROUTER_BASE_URL}/models`),
a model seeing images when `architecture.input_modalities` contains "image".

Fetched once at start-up and again every day by the catalog's own task (start()/close()),
kept in memory. While it has never been fetched every model counts as text only (no image
is sent to a model that may refuse it); one WARNING says so per outage, not per try. A
failed refresh keeps the list it had."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

import openai
from openai import AsyncOpenAI

from membot.media.provider import provider_failure

log = logging.getLogger(__name__)

DAY = 86_400.0


class ModelCatalog:
    """The input modalities of every model the provider lists."""

    def __init__(self, client: AsyncOpenAI, *, refresh_every: float = DAY) -> None:
        self._client = client
        self._refresh_every = refresh_every
        self._modalities: dict[str, frozenset[str]] = {}
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
        """Stop refreshing and wait until the task has stopped."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def refresh(self) -> bool:
        """Fetch the list once more. True if it was fetched; on failure the old one stays."""
        started = time.perf_counter()
        try:
            reply = await self._client.get("/models", cast_to=object)
            modalities = _parse(reply)
        except openai.OpenAIError as exc:
            self._failed(provider_failure(exc)[1])
            return False
        except ValueError:
            self._failed("unreadable list")
            return False
        self._modalities = modalities
        self._fetched = True
        if self._failing:
            log.info("model list: fetched again")
        self._failing = False
        log.info(
            "model list: %d models, %d see images, took=%.3fs",
            len(modalities),
            sum(1 for m in modalities.values() if "image" in m),
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


def _parse(reply: object) -> dict[str, frozenset[str]]:
    """`{"data": [{"id", "architecture": {"input_modalities": [...]}}]}` as id -> modalities.
    Raises ValueError when the reply is not such a list."""
    data = reply.get("data") if isinstance(reply, Mapping) else None
    if not isinstance(data, list):
        raise ValueError("no model list")
    out: dict[str, frozenset[str]] = {}
    for entry in data:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
            continue
        architecture: Any = entry.get("architecture")
        raw = architecture.get("input_modalities") if isinstance(architecture, Mapping) else None
        names = {m for m in raw if isinstance(m, str)} if isinstance(raw, list) else {"text"}
        out[entry["id"]] = frozenset(names or {"text"})
    return out
