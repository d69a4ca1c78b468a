"""The one door to the model: the official `openai` client pointed at OpenRouter."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import aiohttp
import openai
from openai import AsyncOpenAI, DefaultAioHttpClient
from openai.types.chat import ChatCompletion

from membot.llm.errors import (
    LLMError,
    LLMRateLimited,
    LLMRejected,
    LLMTimeout,
    LLMUnavailable,
)
from membot.llm.model import CallOptions, ChatMessage, LLMResponse, Usage

log = logging.getLogger(__name__)

_NO_OPTIONS = CallOptions()
#: OpenRouter's server-side web search, run by OpenRouter within the one completion.
WEB_SEARCH_TOOL: dict[str, Any] = {"type": "openrouter:web_search"}
#: The older form of the same thing, for models whose providers refuse server tools.
WEB_PLUGIN: dict[str, Any] = {"id": "web"}
# Statuses with which a provider refuses a request for carrying a tool type it does not know.
_SERVER_TOOL_REFUSALS = frozenset({400, 404, 422})


class OpenAIChatModel:
    """ChatModel over any OpenAI-compatible endpoint (OpenRouter by default).

    Retries, backoff and timeouts are the openai client's own: `retries` > 0 retries
    connection errors, 408, 409, 429 and 5xx with exponential backoff.

    Requests travel over the SDK's aiohttp transport (the `openai[aiohttp]` extra; aiohttp is
    already here for aiogram). The default httpx pool checks every pooled connection with two
    syscalls before each request, so with dozens of chats in flight it cost more CPU than
    the rest of the request; aiohttp's connector does not.
    """

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str,
        model: str,
        timeout: float,
        retries: int = 0,
    ) -> None:
        self.model = model
        # Models whose provider refused the web search server tool: they get the plugin.
        self._plugin_search_models: set[str] = set()
        self._client = AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            max_retries=retries,
            http_client=DefaultAioHttpClient(timeout=timeout),
            # OpenRouter's optional app attribution headers.
            default_headers={"X-Title": "membot", "HTTP-Referer": "https://github.com/membot"},
        )

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: str = "chat",
        tools: Sequence[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        options: CallOptions | None = None,
    ) -> LLMResponse:
        opts = options or _NO_OPTIONS
        model = opts.model or self.model
        started = time.perf_counter()
        request = _Request(model, list(messages), list(tools or ()), tool_choice, opts)
        try:
            completion = await self._post_with_fallback(purpose, request)
        except openai.OpenAIError as exc:
            raise self._failure(purpose, model, started, exc) from None

        elapsed = time.perf_counter() - started
        if not completion.choices:
            self._log_failure(purpose, model, started, "no choices")
            raise LLMUnavailable("the provider returned no choices")
        choice = completion.choices[0]
        usage = _usage(completion)
        tool_calls = tuple(
            tc.model_dump(exclude_none=True) for tc in choice.message.tool_calls or ()
        )
        # OpenRouter reports the model that answered (a router such as openrouter/auto
        # resolves to a concrete one); that is the one worth logging.
        answered_by = completion.model or model
        log.info(
            "llm %s: model=%s status=ok duration=%.3fs tokens=%d+%d finish=%s",
            purpose,
            answered_by,
            elapsed,
            usage.prompt_tokens,
            usage.completion_tokens,
            choice.finish_reason,
        )
        return LLMResponse(
            content=choice.message.content or "",
            tool_calls=tool_calls,
            model=answered_by,
            finish_reason=choice.finish_reason,
            usage=usage,
        )

    async def _post_with_fallback(self, purpose: str, request: _Request) -> ChatCompletion:
        """Send ``request``; if its web search server tool is refused, once more with the
        plugin instead, and use the plugin for that model from then on."""
        plugin = request.model in self._plugin_search_models
        try:
            return await self._post(request.body(web_plugin=plugin))
        except openai.APIStatusError as exc:
            tried_server_tool = request.options.web_search and not plugin
            if not tried_server_tool or exc.status_code not in _SERVER_TOOL_REFUSALS:
                raise
            log.warning(
                "llm %s: model=%s refused the web search tool (http %d); retrying with the plugin",
                purpose,
                request.model,
                exc.status_code,
            )
        completion = await self._post(request.body(web_plugin=True))
        # Remembered only now: had the retry failed too, the refusal was about something else.
        self._plugin_search_models.add(request.model)
        return completion

    async def _post(self, body: dict[str, Any]) -> ChatCompletion:
        # The same request `chat.completions.create` sends, with the same retries,
        # timeouts and errors, minus its walk of the body through the SDK's TypedDicts:
        # our body is plain JSON already, and that walk cost ~10 ms per 20-message prompt.
        return await self._client.post("/chat/completions", body=body, cast_to=ChatCompletion)

    def _failure(
        self, purpose: str, model: str, started: float, exc: openai.OpenAIError
    ) -> LLMError:
        """Log a failed call and say what it means for the turn."""
        if isinstance(exc, openai.APITimeoutError) and not _refused(exc):
            self._log_failure(purpose, model, started, "timeout")
            return LLMTimeout("the model did not answer in time")
        if isinstance(exc, openai.APIConnectionError):  # includes refused connects
            self._log_failure(purpose, model, started, "connection error")
            return LLMUnavailable("cannot reach the provider")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            self._log_failure(purpose, model, started, f"http {status}")
            if isinstance(exc, openai.RateLimitError):
                return LLMRateLimited("rate limited by the provider", status=status)
            if isinstance(exc, openai.InternalServerError):
                return LLMUnavailable("the provider failed", status=status)
            return LLMRejected(
                "the provider refused the request", status=status, reason=_provider_reason(exc)
            )
        # Malformed bodies and the like: still the provider's fault, still not a crash.
        self._log_failure(purpose, model, started, type(exc).__name__)
        return LLMUnavailable("unusable reply from the provider")

    def _log_failure(self, purpose: str, model: str, started: float, status: str) -> None:
        log.error(
            "llm %s: model=%s status=%s duration=%.3fs",
            purpose,
            model,
            status,
            time.perf_counter() - started,
        )

    async def close(self) -> None:
        await self._client.close()


@dataclass(frozen=True, slots=True)
class _Request:
    """One call's inputs; ``body`` renders them as OpenRouter's JSON."""

    model: str
    messages: list[ChatMessage]
    tools: list[dict[str, Any]]
    tool_choice: str | None
    options: CallOptions

    def body(self, *, web_plugin: bool) -> dict[str, Any]:
        opts = self.options
        body: dict[str, Any] = {"model": self.model, "messages": self.messages}
        tools = list(self.tools)
        # tool_choice steers function calls only; without function tools it means nothing.
        if tools and self.tool_choice:
            body["tool_choice"] = self.tool_choice
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


def _usage(completion: ChatCompletion) -> Usage:
    """A call's tokens and cost, from the provider's `usage` block."""
    usage = completion.usage
    if usage is None:
        return Usage()
    details = usage.prompt_tokens_details
    return Usage(
        prompt_tokens=usage.prompt_tokens or 0,
        completion_tokens=usage.completion_tokens or 0,
        cached_tokens=(details.cached_tokens or 0) if details is not None else 0,
        cost=_cost(getattr(usage, "cost", None)),
    )


def _cost(value: object) -> Decimal | None:
    """The reported cost, exactly as written in the JSON (a float's shortest repr is that)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        cost = Decimal(str(value))
    except InvalidOperation:
        return None
    return cost if cost.is_finite() and cost >= 0 else None


def _provider_reason(exc: openai.APIStatusError) -> str:
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


def _refused(exc: BaseException) -> bool:
    """Whether a "timeout" was really a refused or failed connect. The SDK's aiohttp transport
    maps every aiohttp connection error to a connect *timeout*; the log should say what
    happened, so look for aiohttp's connector error under it."""
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, aiohttp.ClientConnectorError):
            return True
        cause = cause.__cause__
    return False
