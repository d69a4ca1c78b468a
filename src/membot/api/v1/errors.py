"""The /v1 endpoint's errors in OpenAI's shape, `{"error": {"message", "type", "param",
"code"}}`, with OpenAI's statuses, so that its clients show them: the API's own errors
(`ApiError`) translated, and the ones only this door has (client-side tools, `n`, the
caller's budgets and rate limit, an unknown model)."""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any, Final

from aiohttp import web

from membot.api.errors import ERROR_STATUS, ApiError, ErrorCode, media_error
from membot.api.wire import json_response
from membot.errors import MembotError
from membot.media.errors import MediaError
from membot.usage import OverLimit

# OpenAI's codes where it has one; the API's own code in lower case otherwise.
_CODES: Final = {
    ErrorCode.UNAUTHORIZED: "invalid_api_key",
    ErrorCode.MESSAGE_TOO_LARGE: "string_above_max_length",
}
# OpenAI answers these as 400 (a too long string) and every provider failure as 502 here.
_STATUSES: Final = {ErrorCode.MESSAGE_TOO_LARGE: 400, ErrorCode.LLM_TIMEOUT: 502}


class V1Error(MembotError):
    """An answer other than 200 on /v1; `code` is stable, `message` for people (never
    logged: it may quote the provider)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        param: str | None = None,
        kind: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(code)
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.kind = kind or _kind(status)
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> web.Response:
        headers = dict(self.headers)
        if self.status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        return json_response(self.status, self.body(), headers)


def _kind(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    return "server_error" if status >= 500 else "invalid_request_error"


def from_api_error(error: ApiError) -> V1Error:
    """An ApiError as /v1 answers it."""
    status = _STATUSES.get(error.code, ERROR_STATUS[error.code])
    code = _CODES.get(error.code, error.code.value.lower())
    return V1Error(status, code, error.message)


def from_media_error(exc: MediaError, places: tuple[str, ...]) -> V1Error:
    """A file membot cannot use, as /v1 answers it: the API's sentence, which names
    attachments[i], naming the file's content part (`places`: each upload's, in order)."""
    error = from_api_error(media_error(exc))
    if exc.position is not None and 0 < exc.position <= len(places):
        error.param = places[exc.position - 1]
        error.message = re.sub(r"\(attachments\[\d+\]", f"({error.param}", error.message)
    return error


def invalid(message: str, param: str | None = None, code: str = "invalid_request") -> V1Error:
    return V1Error(400, code, message, param=param)


def over_limit(refused: OverLimit, now: datetime) -> V1Error:
    """429 for the caller's budgets (OpenAI's insufficient_quota) or rate limit, with
    Retry-After: when it resets."""
    wait = max(1, math.ceil((refused.resets_at - now).total_seconds()))
    headers = {"Retry-After": str(wait)}
    when = refused.resets_at.strftime("%Y-%m-%d %H:%M UTC")
    if refused.limit == "rate":
        sentence = f"Too many messages in a minute (USER_RATE_LIMIT); try again in {wait} s."
        return V1Error(429, "rate_limit_exceeded", sentence, headers=headers)
    sentence = f"The {refused.limit} budget is spent; it resets at {when}."
    return V1Error(429, "insufficient_quota", sentence, kind="insufficient_quota", headers=headers)


def unknown_model(model: str, offered: tuple[str, ...], param: str | None = "model") -> V1Error:
    listed = ", ".join(offered)
    return V1Error(
        404,
        "model_not_found",
        f"The model {model} is not offered here; GET /v1/models lists them: {listed}.",
        param=param,
    )
