"""What every route of the server shares: the body read within its cap, JSON answers in
UTF-8, and the bearer token checked against API_TOKENS."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any

from aiohttp import web
from pydantic import SecretStr

from membot.api.errors import ApiError, ErrorCode
from membot.api.models import MAX_BODY_BYTES

# What the request's log line says (api/server.py `_log_request`).
SESSION = web.RequestKey("membot_session", str)
ROUND = web.RequestKey("membot_round", int)
CODE = web.RequestKey("membot_code", str)


class Tokens:
    """API_TOKENS, kept as digests."""

    def __init__(self, tokens: Sequence[SecretStr]) -> None:
        self._digests = tuple(_digest(t.get_secret_value()) for t in tokens)

    def bearer(self, request: web.Request) -> str | None:
        """The request's token when it is one of API_TOKENS (`Authorization: Bearer`)."""
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        presented = _digest(token)
        # Every token is compared, in constant time and as digests of one length: neither
        # timing nor the order of API_TOKENS tells a caller how close a guess came.
        matched = False
        for known in self._digests:
            matched |= hmac.compare_digest(presented, known)
        return token if matched and scheme.lower() == "bearer" else None

    def authorized(self, request: web.Request) -> bool:
        return self.bearer(request) is not None


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "replace")).digest()


async def read_body(request: web.Request) -> bytes:
    """The body, refused past MAX_BODY_BYTES: by its declared length before reading, and
    by what actually arrives (a chunked body declares none)."""
    too_large = ApiError(ErrorCode.PAYLOAD_TOO_LARGE)
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise too_large
    body = bytearray()
    async for chunk in request.content.iter_any():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise too_large
    return bytes(body)


def json_response(
    status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
) -> web.Response:
    # UTF-8 as it is, not \u escapes: an answer in Russian must read in curl. (JSON is UTF-8
    # by RFC 8259; the charset is said all the same, for clients that guess otherwise.)
    return web.Response(
        body=json.dumps(payload, ensure_ascii=False).encode(),
        status=status,
        headers=headers,
        content_type="application/json",
        charset="utf-8",
    )
