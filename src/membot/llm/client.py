"""The one door to the model: the official `openai` client pointed at OpenRouter."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

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

log = logging.getLogger(__name__)

ChatMessage = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True, slots=True)
class LLMResponse:
    content: str
    tool_calls: tuple[dict[str, Any], ...] = ()
    model: str = ""
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)


class ChatModel(Protocol):
    """What the agent and the summarizer need from a model: one non-streaming completion."""

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: str = "chat",
        tools: Sequence[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> LLMResponse: ...

    async def close(self) -> None: ...


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
    ) -> LLMResponse:
        started = time.perf_counter()
        body: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
            if tool_choice:
                body["tool_choice"] = tool_choice
        try:
            # The same request `chat.completions.create` sends, with the same retries,
            # timeouts and errors, minus its walk of the body through the SDK's TypedDicts:
            # our body is plain JSON already, and that walk cost ~10 ms per 20-message prompt.
            completion = await self._client.post(
                "/chat/completions", body=body, cast_to=ChatCompletion
            )
        except openai.APITimeoutError as exc:
            if _refused(exc):
                self._log_failure(purpose, started, "connection error")
                raise LLMUnavailable("cannot reach the provider") from None
            self._log_failure(purpose, started, "timeout")
            raise LLMTimeout("the model did not answer in time") from None
        except openai.RateLimitError as exc:
            self._log_failure(purpose, started, f"http {exc.status_code}")
            raise LLMRateLimited("rate limited by the provider", status=exc.status_code) from None
        except openai.InternalServerError as exc:
            self._log_failure(purpose, started, f"http {exc.status_code}")
            raise LLMUnavailable("the provider failed", status=exc.status_code) from None
        except openai.APIStatusError as exc:
            self._log_failure(purpose, started, f"http {exc.status_code}")
            raise LLMRejected("the provider refused the request", status=exc.status_code) from None
        except openai.APIConnectionError:
            self._log_failure(purpose, started, "connection error")
            raise LLMUnavailable("cannot reach the provider") from None
        except openai.OpenAIError as exc:
            # Malformed bodies and the like: still the provider's fault, still not a crash.
            self._log_failure(purpose, started, type(exc).__name__)
            raise LLMUnavailable("unusable reply from the provider") from None

        elapsed = time.perf_counter() - started
        if not completion.choices:
            self._log_failure(purpose, started, "no choices")
            raise LLMUnavailable("the provider returned no choices")
        choice = completion.choices[0]
        usage = Usage(
            prompt_tokens=completion.usage.prompt_tokens if completion.usage else 0,
            completion_tokens=completion.usage.completion_tokens if completion.usage else 0,
        )
        tool_calls = tuple(
            tc.model_dump(exclude_none=True) for tc in choice.message.tool_calls or ()
        )
        log.info(
            "llm %s: model=%s status=ok duration=%.3fs tokens=%d+%d finish=%s",
            purpose,
            completion.model or self.model,
            elapsed,
            usage.prompt_tokens,
            usage.completion_tokens,
            choice.finish_reason,
        )
        return LLMResponse(
            content=choice.message.content or "",
            tool_calls=tool_calls,
            model=completion.model or self.model,
            finish_reason=choice.finish_reason,
            usage=usage,
        )

    def _log_failure(self, purpose: str, started: float, status: str) -> None:
        log.error(
            "llm %s: model=%s status=%s duration=%.3fs",
            purpose,
            self.model,
            status,
            time.perf_counter() - started,
        )

    async def close(self) -> None:
        await self._client.close()


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


__all__ = ["ChatMessage", "ChatModel", "LLMError", "LLMResponse", "OpenAIChatModel", "Usage"]
