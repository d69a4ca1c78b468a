"""What a call closed early (the user pressed Stop, an API client went away) is charged.

The provider reports a streamed call's usage in its last chunk only, and bills what it
generated all the same; a request it received bills its prompt even if nothing was written
yet, streamed or not. So such a call is charged an estimate: about 4 characters a token,
the prompt's text (its images not counted) and what was written (none, before the first
piece or for a cancelled plain call). Its cost is that estimate at
the model's list price (OpenRouter's `pricing`, from the model list: `PriceList`), so stopped
answers count toward the budgets like finished ones. The model priced is the one the
provider said was answering (a router such as openrouter/auto names the concrete one), else
the one asked for; with neither priced (the list not fetched yet, a model it lacks, a router
whose price is variable) the charge has no cost, an "unpriced" call, as before. Reasoning
tokens the model spent before writing are not seen, and no prompt tokens are taken as cached:
the estimate is rough both ways. Such charges are marked `estimated` in the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from membot.llm.model import ChatMessage, LLMResponse, Price

CHARS_PER_TOKEN = 4


class PriceList(Protocol):
    """Models' list prices (membot.media.catalog.ModelCatalog, handed over by the wiring)."""

    def price(self, model: str) -> Price | None:
        """Per token, or None when unknown."""
        ...


def estimate(
    models: Sequence[str],
    messages: Sequence[ChatMessage],
    written: int,
    prices: PriceList | None,
) -> LLMResponse:
    """A stopped call's usage, which the provider never reported; priced at the first of
    `models` (the answering one, then the one asked for) whose price is known. The response
    names that model, else the first one."""
    from membot.llm.model import LLMResponse, Usage

    prompt = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            prompt += len(content)
        elif isinstance(content, list):
            prompt += sum(
                len(str(part.get("text", ""))) for part in content if isinstance(part, dict)
            )
    prompt_tokens = -(-prompt // CHARS_PER_TOKEN)
    completion_tokens = -(-written // CHARS_PER_TOKEN)
    named = [model for model in models if model]
    model, cost = (named[0] if named else ""), None
    for candidate in named:
        price = prices.price(candidate) if prices is not None else None
        if price is not None:
            model, cost = candidate, price.of(prompt_tokens, completion_tokens)
            break
    usage = Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost=cost)
    return LLMResponse(content="", model=model, finish_reason="stopped", usage=usage)
