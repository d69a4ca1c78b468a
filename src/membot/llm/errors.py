"""What can go wrong when talking to the model. Every LLM failure is one of these.

    LLMError                the model could not give an answer this time
    ├── LLMTimeout          no answer within LLM_TIMEOUT (after retries, if enabled)
    ├── LLMRateLimited      429 from the provider
    ├── LLMUnavailable      5xx, connection failures, or a reply with no usable choice
    └── LLMRejected         the provider refused the request (4xx: auth, bad model, ...)

None of them carry message text; all are safe to log.
"""

from __future__ import annotations


class LLMError(Exception):
    """Base class: the turn failed, nothing was stored, the user gets a service message."""

    status: int | None = None

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMTimeout(LLMError):
    pass


class LLMRateLimited(LLMError):
    pass


class LLMUnavailable(LLMError):
    pass


class LLMRejected(LLMError):
    pass
