"""Which conversation: a namespace (the front door it belongs to) and a key within it.

    tg:<chat id>        a Telegram chat (negative for groups)
    api:<uuid>          an HTTP API session
    v1:<32 hex digits>  a caller of the OpenAI-compatible /v1 endpoint (a digest, never the
                        caller's own words: `ConversationId.v1_user` / `v1_token`)

A `ConversationId` can only be built from a valid namespace and key, and `relative_path()`
is the one function that turns one into a place in storage (a directory under DATA_DIR; the
Redis backend uses `str(cid)`, which is validated the same way). Nothing a user typed
reaches a path or a key without passing through here.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final

from membot.errors import MembotError

TELEGRAM: Final = "tg"
API: Final = "api"
V1: Final = "v1"

_TG_KEY = re.compile(r"-?[1-9][0-9]{0,19}")
_UUID_KEY = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DIGEST_KEY = re.compile(r"[0-9a-f]{32}")
_KEYS: Final = {TELEGRAM: _TG_KEY, API: _UUID_KEY, V1: _DIGEST_KEY}
NAMESPACES: Final = tuple(_KEYS)


class InvalidConversationId(MembotError, ValueError):
    """A namespace or key that does not name a conversation."""


@dataclass(frozen=True, slots=True, order=True)
class ConversationId:
    namespace: str
    key: str

    def __post_init__(self) -> None:
        pattern = _KEYS.get(self.namespace) if isinstance(self.namespace, str) else None
        if pattern is None:
            raise InvalidConversationId(f"unknown conversation namespace {self.namespace!r}")
        if not isinstance(self.key, str) or not pattern.fullmatch(self.key):
            raise InvalidConversationId(f"invalid {self.namespace} conversation key")

    @classmethod
    def telegram(cls, chat_id: int) -> ConversationId:
        if isinstance(chat_id, bool) or not isinstance(chat_id, int):
            raise InvalidConversationId("a Telegram chat id must be an int")
        return cls(TELEGRAM, str(chat_id))

    @classmethod
    def api(cls, session_id: str | uuid.UUID) -> ConversationId:
        """An API session; the id must be a UUID (any case, with or without braces)."""
        try:
            value = session_id if isinstance(session_id, uuid.UUID) else uuid.UUID(session_id)
        except (ValueError, TypeError, AttributeError):
            raise InvalidConversationId("a session id must be a UUID") from None
        return cls(API, str(value))

    @classmethod
    def v1_user(cls, user: str) -> ConversationId:
        """The /v1 endpoint's conversation of a named caller (the request's `user`, or the
        X-OpenWebUI-User-Id header): whatever the name is, only its digest is a key."""
        return cls._v1(f"user:{user}")

    @classmethod
    def v1_token(cls, token: str) -> ConversationId:
        """The /v1 endpoint's conversation of a caller that names no user: its API token's."""
        return cls._v1(f"token:{token}")

    @classmethod
    def _v1(cls, caller: str) -> ConversationId:
        # 128 bits of SHA-256: the prefix keeps a user named like a token apart from it.
        raw = caller.encode("utf-8", "surrogatepass")  # JSON may carry a lone surrogate
        return cls(V1, hashlib.sha256(raw).hexdigest()[:32])

    @classmethod
    def parse(cls, text: str) -> ConversationId:
        """`tg:123` or `api:<uuid>`; a bare integer is a Telegram chat (operator commands)."""
        namespace, sep, key = text.strip().partition(":")
        if not sep:
            namespace, key = TELEGRAM, namespace
        if namespace == API:
            return cls.api(key)
        return cls(namespace, key)

    @property
    def chat_id(self) -> int:
        """Telegram's chat id; only for `tg` conversations."""
        if self.namespace != TELEGRAM:
            raise InvalidConversationId(f"{self} is not a Telegram chat")
        return int(self.key)

    def relative_path(self) -> PurePosixPath:
        """Where the conversation lives under DATA_DIR. Telegram chats keep the layout they
        always had (DATA_DIR/<chat id>/); other namespaces get a directory of their own."""
        if self.namespace == TELEGRAM:
            return PurePosixPath(self.key)
        return PurePosixPath(self.namespace, self.key)

    def __str__(self) -> str:
        return f"{self.namespace}:{self.key}"
