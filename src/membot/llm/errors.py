"""What can go wrong when talking to the model. Every LLM failure is one of these.

    LLMError                the model could not give an answer this time
    ├── LLMTimeout          no answer within LLM_TIMEOUT (after retries, if enabled)
    ├── LLMRateLimited      429 from the provider
    ├── LLMUnavailable      5xx, connection failures, or a reply with no usable choice
    ├── LLMRejected         the provider refused the request (4xx: auth, bad model, ...);
    │                       the provider's own explanation is on `.reason`
    └── LLMInvalidOutput    the model's reply did not match the requested output format
                            even after one repair request (what was wrong: `.reason`)

None of them carry message text in str(); all are safe to log. The `.reason` attributes
are the provider's text or a check of the model's reply, either of which may quote
messages, so they live on the attribute only.
"""

from __future__ import annotations

import re

from membot.errors import MembotError, Unavailable

#: Longest provider reason / validation reason we keep: enough to act on, short enough to log.
REASON_CHARS = 300

_SPACES = re.compile(r"\s+")


def clip_reason(text: str, limit: int = REASON_CHARS) -> str:
    """``text`` on one line (runs of whitespace collapsed) and at most ``limit`` characters."""
    flat = _SPACES.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + "…"


class LLMError(MembotError):
    """Base class: the turn failed, nothing was stored, the user gets a service message."""

    status: int | None = None

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMTimeout(LLMError):
    pass


class LLMRateLimited(LLMError):
    pass


class LLMUnavailable(LLMError, Unavailable):
    pass


class LLMRejected(LLMError):
    """The provider said no. ``reason`` is what it said (collapsed, at most 300 characters)."""

    reason: str = ""

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message, status=status)
        self.reason = clip_reason(reason)


class LLMInvalidOutput(LLMError):
    """The model's reply did not match the requested output format even after one repair
    request. ``reason`` says what was wrong with the last reply; it may quote the reply."""

    reason: str = ""

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = clip_reason(reason)
