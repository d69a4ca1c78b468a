"""What goes on the wire to the provider and what comes back besides the text: the request
body (OpenRouter's JSON), a call's usage and cost, the sources an answer cites, the
provider's own words in an error. Shared by the plain and the streamed call (llm/client.py,
llm/streaming.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import aiohttp
import openai
from openai.types import CompletionUsage

from membot.llm.cache import for_wire
from membot.llm.model import MAX_SOURCES, ModelRequest, Source, Usage

#: OpenRouter's server-side web search, run by OpenRouter within the one completion.
WEB_SEARCH_TOOL: dict[str, Any] = {"type": "openrouter:web_search"}
#: The older form of the same thing, for models whose providers refuse server tools.
WEB_PLUGIN: dict[str, Any] = {"id": "web"}


@dataclass(frozen=True, slots=True)
class WireRequest:
    """A request on its way to ``model`` (its own, else the client's); ``body`` renders it as
    OpenRouter's JSON."""

    model: str
    request: ModelRequest

    def body(self, *, web_plugin: bool) -> dict[str, Any]:
        opts = self.request.options
        # Cache breakpoints where the agent marked them, for the models that need them.
        body: dict[str, Any] = {
            **opts.sampling,
            "model": self.model,
            "messages": for_wire(self.model, self.request.messages),
        }
        tools = list(self.request.tools)
        # tool_choice steers function calls only; without function tools it means nothing.
        if tools and self.request.tool_choice:
            body["tool_choice"] = self.request.tool_choice
        if opts.web_search and not web_plugin:
            tools.append(WEB_SEARCH_TOOL)
        if tools:
            body["tools"] = tools
        if opts.web_search and web_plugin:
            body["plugins"] = [WEB_PLUGIN]
        if opts.max_tokens is not None:
            body["max_tokens"] = opts.max_tokens
        if opts.response_format is not None:
            body["response_format"] = opts.response_format
        if opts.require_parameters:
            body["provider"] = {"require_parameters": True}
        return body


def usage_of(usage: CompletionUsage | None) -> Usage:
    """A call's tokens and cost, from the provider's `usage` block."""
    if usage is None:
        return Usage()
    details = usage.prompt_tokens_details
    return Usage(
        prompt_tokens=usage.prompt_tokens or 0,
        completion_tokens=usage.completion_tokens or 0,
        cached_tokens=(details.cached_tokens or 0) if details is not None else 0,
        cost=_cost(getattr(usage, "cost", None)),
    )


def sources_of(annotations: Iterable[object]) -> tuple[Source, ...]:
    """The pages an answer cites: its `url_citation` annotations (OpenRouter's shape:
    `{"type": "url_citation", "url_citation": {"url", "title", "content", "start_index",
    "end_index"}}`), each URL once, in the order first cited; a title a later citation of
    the same URL gives fills one the first lacked."""
    found: dict[str, Source] = {}
    for annotation in annotations:
        if not isinstance(annotation, dict) or annotation.get("type") != "url_citation":
            continue
        citation = annotation.get("url_citation")
        url = citation.get("url") if isinstance(citation, dict) else None
        if not isinstance(url, str) or not url.strip():
            continue
        url = url.strip()
        title = citation.get("title") if isinstance(citation, dict) else None
        title = " ".join(title.split()) if isinstance(title, str) else ""
        known = found.get(url)
        if (known is None and len(found) < MAX_SOURCES) or (known and title and not known.title):
            found[url] = Source(url=url, title=title)
    return tuple(found.values())


def _cost(value: object) -> Decimal | None:
    """The reported cost, exactly as written in the JSON (a float's shortest repr is that)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        cost = Decimal(str(value))
    except InvalidOperation:
        return None
    return cost if cost.is_finite() and cost >= 0 else None


def provider_reason(exc: openai.APIStatusError) -> str:
    """The provider's own explanation of an error answer. The SDK keeps the JSON ``error``
    object as ``body``; OpenRouter puts an upstream provider's words in ``metadata.raw``."""
    body = exc.body
    if isinstance(body, str):
        return body
    if not isinstance(body, dict):
        return exc.message
    message = body.get("message")
    reason = message if isinstance(message, str) and message else exc.message
    metadata = body.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if isinstance(raw, str) and raw and raw not in reason:
        reason = f"{reason}: {raw}"
    return reason


def refused(exc: BaseException) -> bool:
    """Whether a "timeout" was really a refused or failed connect. The SDK's aiohttp transport
    maps every aiohttp connection error to a connect *timeout*; the log should say what
    happened, so look for aiohttp's connector error under it."""
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, aiohttp.ClientConnectorError):
            return True
        cause = cause.__cause__
    return False
