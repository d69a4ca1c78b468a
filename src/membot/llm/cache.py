"""Prompt-cache breakpoints for providers that want them spelled out.

OpenRouter caches prompt prefixes by itself for most providers (OpenAI, DeepSeek, ...), but
Anthropic's and Google's models cache only up to explicit `cache_control` breakpoints, put on
a content part. The prompt builder (core/prompt.py) marks where the prompt's stable parts end
(the head, the window) with `mark`; `for_wire` turns the marks into breakpoints for those
models and drops them for the others, so a marked prompt is valid everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from membot.llm.model import ChatMessage

# A key of our own on a canonical message; never sent.
CACHE_MARK = "membot_cache_mark"
EPHEMERAL: dict[str, Any] = {"type": "ephemeral"}
# Model ids (OpenRouter's) whose providers cache only at explicit breakpoints.
MARKED_PROVIDERS = ("anthropic/", "google/")


def mark(message: ChatMessage) -> ChatMessage:
    """The message with a breakpoint after it (a copy)."""
    return {**message, CACHE_MARK: True}


def needs_breakpoints(model: str) -> bool:
    return model.startswith(MARKED_PROVIDERS)


def for_wire(model: str, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The messages as sent to `model`: marks become `cache_control` on the message's last
    content part for Anthropic and Google models, and vanish for the others."""
    if not any(CACHE_MARK in m for m in messages):
        return list(messages)
    breakpoints = needs_breakpoints(model)
    out: list[ChatMessage] = []
    for message in messages:
        if CACHE_MARK not in message:
            out.append(message)
            continue
        plain = {k: v for k, v in message.items() if k != CACHE_MARK}
        out.append(_with_breakpoint(plain) if breakpoints else plain)
    return out


def _with_breakpoint(message: ChatMessage) -> ChatMessage:
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return message  # an empty text part is refused; no breakpoint here
        parts: list[Any] = [{"type": "text", "text": content}]
    elif isinstance(content, list) and content:
        parts = [dict(part) if isinstance(part, dict) else part for part in content]
    else:
        return message
    if isinstance(parts[-1], dict):
        parts[-1] = {**parts[-1], "cache_control": dict(EPHEMERAL)}
    return {**message, "content": parts}
