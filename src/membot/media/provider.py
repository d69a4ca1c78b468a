"""The HTTP client for OpenRouter's endpoints beside chat: speech-to-text and the model list.

The official `openai` client, built as the chat model's is (llm/client.py): same key, base
URL, timeout, retries and aiohttp transport, so these calls fail, retry and time out as a
chat call does. Its generic `get`/`post` send our own JSON: OpenRouter's transcription
body is not OpenAI's multipart upload, so the SDK's `audio.transcriptions` is not used."""

from __future__ import annotations

import logging

import openai
from openai import AsyncOpenAI, DefaultAioHttpClient

from membot.config.groups import LlmSettings
from membot.llm.errors import (
    LLMError,
    LLMRateLimited,
    LLMRejected,
    LLMTimeout,
    LLMUnavailable,
)
from membot.llm.wire import refused

log = logging.getLogger(__name__)


def provider_client(llm: LlmSettings, *, retries: int = 0) -> AsyncOpenAI:
    """A client for OPENROUTER_BASE_URL. The caller owns it and closes it (`await .close()`)."""
    return AsyncOpenAI(
        api_key=llm.api_key.get_secret_value(),
        base_url=llm.base_url,
        timeout=llm.timeout,
        max_retries=retries,
        http_client=DefaultAioHttpClient(timeout=llm.timeout),
        default_headers={"X-Title": "membot", "HTTP-Referer": "https://github.com/membot"},
    )


def provider_failure(exc: openai.OpenAIError) -> tuple[LLMError, str]:
    """What a failed call means (an LLMError, safe to log) and a short status for the log."""
    if isinstance(exc, openai.APITimeoutError) and not refused(exc):
        return LLMTimeout("the provider did not answer in time"), "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return LLMUnavailable("cannot reach the provider"), "connection error"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if isinstance(exc, openai.RateLimitError):
            return LLMRateLimited("rate limited by the provider", status=status), f"http {status}"
        if isinstance(exc, openai.InternalServerError):
            return LLMUnavailable("the provider failed", status=status), f"http {status}"
        reason = _reason(exc)
        rejected = LLMRejected("the provider refused the request", status=status, reason=reason)
        return rejected, f"http {status}"
    return LLMUnavailable("unusable reply from the provider"), type(exc).__name__


def _reason(exc: openai.APIStatusError) -> str:
    """The provider's words: the SDK keeps the JSON `error` object as `body`."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return body if isinstance(body, str) else exc.message
