"""The one door to the model: the official `openai` client pointed at OpenRouter."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, TypeVar

import httpx2
import openai
import orjson
from openai import AsyncOpenAI, DefaultAioHttpClient
from openai._models import FinalRequestOptions
from openai.types.chat import ChatCompletion

from membot.llm.errors import (
    LLMError,
    LLMRateLimited,
    LLMRejected,
    LLMTimeout,
    LLMUnavailable,
)
from membot.llm.model import LLMResponse, ModelRequest, StreamItem, StreamNotes
from membot.llm.streaming import READ_HOLD, Assembler, pieces
from membot.llm.wire import (
    WEB_PLUGIN,
    WEB_SEARCH_TOOL,
    WireRequest,
    provider_reason,
    refused,
    sources_of,
    usage_of,
)

__all__ = ["WEB_PLUGIN", "WEB_SEARCH_TOOL", "OpenAIChatModel"]

log = logging.getLogger(__name__)

_Reply = TypeVar("_Reply")
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
        self._model = model
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
        # The request options `post` builds for every call, built once: the SDK's construct
        # resolves each field's default (~30 us a call); a call copies them with its own body
        # (~2 us), and the client copies them again before each try, as it does for `post`.
        self._chat = FinalRequestOptions.construct(
            method="post", url="/chat/completions", json_data=None, files=None
        )

    @property
    def model_name(self) -> str:
        """The model a request that names none goes to (OPENROUTER_MODEL)."""
        return self._model

    async def complete(self, request: ModelRequest) -> LLMResponse:
        purpose = request.purpose
        model = request.model_or(self._model)
        started = time.perf_counter()
        try:
            completion = await self._post_with_fallback(WireRequest(model, request), self._post)
        except openai.OpenAIError as exc:
            raise self._failure(purpose, model, started, exc) from None
        if not completion.choices:
            self._log_failure(purpose, model, started, "no choices")
            raise LLMUnavailable("the provider returned no choices")
        choice = completion.choices[0]
        message = choice.message
        tool_calls = tuple(tc.model_dump(exclude_none=True) for tc in message.tool_calls or ())
        response = LLMResponse(
            content=message.content or "",
            tool_calls=tool_calls,
            # OpenRouter reports the model that answered (a router such as openrouter/auto
            # resolves to a concrete one); that is the one worth logging.
            model=completion.model or model,
            finish_reason=choice.finish_reason,
            usage=usage_of(completion.usage),
            sources=sources_of(a.to_dict() for a in message.annotations or ()),
        )
        self._log_ok(purpose, response, started)
        return response

    async def stream(
        self, request: ModelRequest, notes: StreamNotes | None = None
    ) -> AsyncGenerator[StreamItem, None]:
        """The same call with `stream: true`: the text as it is written, then the whole
        LLMResponse (usage from the last chunk, tool calls put together). Errors are those
        of `complete`, before the first piece or after it. A consumer that stops early
        (closes the generator, or is cancelled) closes the HTTP stream, and the provider
        stops generating; `notes` then names the model the provider said was answering."""
        purpose = request.purpose
        model = request.model_or(self._model)
        started = time.perf_counter()
        assembled = Assembler(model)
        first: float | None = None
        finished = False
        try:
            opened = await self._post_with_fallback(WireRequest(model, request), self._open_stream)
            # Closed however the loop ends, and with it the response.
            hold = READ_HOLD if request.hold is None else request.hold
            streamed = pieces(opened, assembled, hold=hold, ramp=request.ramp)
            async with aclosing(streamed) as written:
                async for piece in written:
                    if first is None:
                        first = time.perf_counter() - started
                    yield piece
            finished = True
        except openai.OpenAIError as exc:
            finished = True
            raise self._failure(purpose, model, started, exc) from None
        finally:
            if notes is not None:  # whoever closed it early learns who wrote what it got
                notes.model = assembled.answered_by
                notes.sources = assembled.sources
            if not finished:  # the consumer went away: nothing more is read or paid for
                log.info(
                    "llm %s: model=%s status=stopped duration=%.3fs",
                    purpose,
                    model,
                    time.perf_counter() - started,
                )
        if not assembled.choices:
            self._log_failure(purpose, model, started, "no choices")
            raise LLMUnavailable("the provider returned no choices")
        response = assembled.response()
        self._log_ok(purpose, response, started, first=first)
        yield response

    def _log_ok(
        self, purpose: str, response: LLMResponse, started: float, *, first: float | None = None
    ) -> None:
        usage = response.usage
        log.info(
            "llm %s: model=%s status=ok duration=%.3fs%s tokens=%d+%d finish=%s",
            purpose,
            response.model,
            time.perf_counter() - started,
            "" if first is None else f" first={first:.3f}s",
            usage.prompt_tokens,
            usage.completion_tokens,
            response.finish_reason,
        )

    async def _post_with_fallback(
        self, wire: WireRequest, send: Callable[[dict[str, Any]], Awaitable[_Reply]]
    ) -> _Reply:
        """Send ``wire``; if its web search server tool is refused, once more with the
        plugin instead, and use the plugin for that model from then on. (A streamed call is
        refused before its first byte, so this holds for both.)"""
        plugin = wire.model in self._plugin_search_models
        try:
            return await send(wire.body(web_plugin=plugin))
        except openai.APIStatusError as exc:
            tried_server_tool = wire.request.options.web_search and not plugin
            if not tried_server_tool or exc.status_code not in _SERVER_TOOL_REFUSALS:
                raise
            log.warning(
                "llm %s: model=%s refused the web search tool (http %d); retrying with the plugin",
                wire.request.purpose,
                wire.model,
                exc.status_code,
            )
        reply = await send(wire.body(web_plugin=True))
        # Remembered only now: had the retry failed too, the refusal was about something else.
        self._plugin_search_models.add(wire.model)
        return reply

    async def _post(self, body: dict[str, Any]) -> ChatCompletion:
        # The same request `chat.completions.create` sends, with the same retries,
        # timeouts and errors, minus its walk of the body through the SDK's TypedDicts:
        # our body is plain JSON already, and that walk cost ~10 ms per 20-message prompt.
        return await self._client.request(ChatCompletion, self._call(body))

    async def _open_stream(self, body: dict[str, Any]) -> httpx2.Response:
        # The usage comes in one last chunk, and only when asked for.
        streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
        # The raw response, its body not read yet: sent, retried and refused (an error
        # status) by the client as a plain call is; llm/streaming.py reads it.
        return await self._client.request(httpx2.Response, self._call(streamed), stream=True)

    def _call(self, body: dict[str, Any]) -> FinalRequestOptions:
        """The options `post("/chat/completions", content=...)` would make for this body."""
        return self._chat.model_copy(update={"content": _json(body)})

    def _failure(
        self, purpose: str, model: str, started: float, exc: openai.OpenAIError
    ) -> LLMError:
        """Log a failed call and say what it means for the turn."""
        if isinstance(exc, openai.APITimeoutError) and not refused(exc):
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
                "the provider refused the request", status=status, reason=provider_reason(exc)
            )
        # Malformed bodies, an error reported in the middle of a stream and the like: still
        # the provider's fault, still not a crash.
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


def _json(body: dict[str, Any]) -> bytes:
    """The body as the client would send it (compact UTF-8 JSON, the same bytes), made by
    orjson: the client's stdlib encoder took ~0.1 ms a call for a 20-message prompt with
    every tool's schema. Sent as the request's content, with the client's own headers
    (Content-Type: application/json), retries and errors. An integer orjson cannot write
    (past 64 bits: an API client's seed or max_tokens) is written by the stdlib, as the
    client did, for the provider to take or refuse."""
    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError:
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
