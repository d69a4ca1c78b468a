"""Charging calls: `MeteredModel` (every model call, see ledger.py for whom it is charged
to) and `ChargeWriter` (the one way a charge is written, also for transcriptions)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import TYPE_CHECKING

from membot.clock import Clock
from membot.llm.model import StreamNotes, Usage
from membot.usage.estimate import PriceList, estimate
from membot.usage.ledger import Charge, Payer, UsageLedger, current_payer, current_tally

if TYPE_CHECKING:
    from membot.llm.model import ChatModel, LLMResponse, ModelRequest, StreamItem

log = logging.getLogger(__name__)


class MeteredModel:
    """A ChatModel that records what each call cost (see ledger.py's docstring). A ledger
    that fails is logged, never the call's failure: the answer was paid for already."""

    def __init__(
        self,
        inner: ChatModel,
        ledger: UsageLedger,
        clock: Clock,
        prices: PriceList | None = None,
    ) -> None:
        self.inner = inner
        self.ledger = ledger
        self.clock = clock
        self.prices = prices  # the list prices a stopped stream's estimate is charged at
        self._writer = ChargeWriter(ledger, clock, "a call's usage")

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    async def complete(self, request: ModelRequest) -> LLMResponse:
        """Charged as the provider reports; cancelled once sent, its prompt, as `stream`."""
        try:
            response = await self.inner.complete(request)
        except asyncio.CancelledError:  # awaited as the task is cancelled: still written
            await self._record(request.purpose, self._guess(request, "", 0), estimated=True)
            raise
        await self._record(request.purpose, response)
        return response

    async def stream(
        self, request: ModelRequest, notes: StreamNotes | None = None
    ) -> AsyncGenerator[StreamItem, None]:
        """The inner model's stream, charged like a plain call when its response arrives.
        The provider reports the usage in its last chunk only, yet bills every request it
        received: a stream closed before that (Stop, an API client gone), even before its
        first piece, is charged an estimate at the model's list price (usage/estimate.py).
        A call that failed (the provider's error, a refused connection) is charged nothing."""
        notes = notes if notes is not None else StreamNotes()
        items = self.inner.stream(request, notes)
        written = 0
        ended = False  # answered (and charged), or failed: no estimate
        try:
            async with aclosing(items):
                async for item in items:
                    if isinstance(item, str):
                        written += len(item)
                    else:
                        ended = True
                        await self._record(request.purpose, item)
                    yield item
        except Exception:
            ended = True
            raise
        finally:
            if not ended:  # sent (this runs once an item was asked for); awaited even as
                guess = self._guess(request, notes.model, written)  # cancelled
                await self._record(request.purpose, guess, estimated=True)

    def _guess(self, request: ModelRequest, by: str, written: int) -> LLMResponse:
        """The usage of a call that ended before the provider reported it."""
        asked = request.model_or(self.model_name)
        return estimate((by, asked), request.messages, written, self.prices)

    async def _record(
        self, purpose: str, response: LLMResponse, *, estimated: bool = False
    ) -> None:
        await self._writer.write(purpose, response.model, response.usage, estimated=estimated)

    async def close(self) -> None:
        await self.inner.close()


class ChargeWriter:
    """Charges calls to the current payer (`charged_to`): the one way a model call
    (MeteredModel) and a transcription (core.media) put what they cost into the ledger. A
    ledger that fails is warned about once per run of failures and is never the caller's
    failure: the call was made and paid for."""

    def __init__(self, ledger: UsageLedger, clock: Clock, what: str) -> None:
        self.ledger = ledger
        self.clock = clock
        self.what = what  # how the warning names what was not recorded
        self._failing = False

    async def write(
        self, purpose: str, model: str, usage: Usage, *, estimated: bool = False
    ) -> None:
        payer = current_payer() or Payer(None, None)
        tally = current_tally()
        if tally is not None:
            tally.add(usage.prompt_tokens, usage.completion_tokens)
        charge = Charge(
            at=self.clock(),
            purpose=purpose,
            model=model,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_tokens=usage.cached_tokens,
            cost=usage.cost,
            user_id=payer.user_id,
            conversation=payer.conversation,
            estimated=estimated,
        )
        try:
            await self.ledger.record(charge)
        except Exception as exc:  # any storage failure: the call itself succeeded
            if not self._failing:
                log.warning("usage: %s was not recorded (%s)", self.what, type(exc).__name__)
            self._failing = True
        else:
            self._failing = False
