"""What a chat's memory is made of. Plain dataclasses: every backend stores the same records."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

Role = Literal["user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"user", "assistant", "tool"})


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class CorruptRecord(ValueError):
    """A stored line that cannot be read back; backends skip it with a warning."""


@dataclass(frozen=True, slots=True)
class Message:
    """One stored message: a line of messages.txt.

    `seq` is the message's 1-based position in the chat's archive, assigned by the repository
    on append; it makes "what is not summarized yet" a number comparison, with no counting.
    `tool_calls` / `tool_call_id` keep an agent's tool use in the history (OpenAI shape).
    """

    role: Role
    content: str
    ts: datetime = field(default_factory=utcnow)
    seq: int = 0
    user_id: int | None = None
    name: str | None = None
    tg_message_id: int | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None

    def to_json(self) -> str:
        data: dict[str, Any] = {"seq": self.seq, "ts": iso(self.ts), "role": self.role}
        data["content"] = self.content
        for key in ("user_id", "name", "tg_message_id", "tool_call_id"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        if self.tool_calls:
            data["tool_calls"] = list(self.tool_calls)
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str | bytes) -> Message:
        try:
            data = json.loads(line)
            role = data["role"]
            if role not in ROLES or not isinstance(data["content"], str):
                raise ValueError("bad role or content")
            return cls(
                role=role,
                content=data["content"],
                ts=parse_iso(data["ts"]),
                seq=int(data["seq"]),
                user_id=_opt_int(data.get("user_id")),
                name=data.get("name"),
                tg_message_id=_opt_int(data.get("tg_message_id")),
                tool_calls=tuple(data.get("tool_calls") or ()),
                tool_call_id=data.get("tool_call_id"),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptRecord(str(exc)) from None


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _opt_iso(ts: datetime | None) -> str | None:
    return iso(ts) if ts else None


@dataclass(slots=True)
class ChatMeta:
    """meta.json: counters, timestamps and the chat's settings."""

    chat_id: int
    messages_total: int = 0
    summarized_upto: int = 0  # seq of the last message the current summary covers
    summaries_made: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    last_summary_at: datetime | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def unsummarized(self) -> int:
        return max(0, self.messages_total - self.summarized_upto)

    def to_dict(self) -> dict[str, Any]:
        # Spelled out rather than dataclasses.asdict, which deep-copies every field: this
        # runs once per turn.
        return {
            "chat_id": self.chat_id,
            "messages_total": self.messages_total,
            "summarized_upto": self.summarized_upto,
            "summaries_made": self.summaries_made,
            "created_at": _opt_iso(self.created_at),
            "updated_at": _opt_iso(self.updated_at),
            "last_summary_at": _opt_iso(self.last_summary_at),
            "settings": dict(self.settings),
            "version": 1,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChatMeta:
        def ts(key: str) -> datetime | None:
            value = data.get(key)
            return parse_iso(value) if value else None

        try:
            return cls(
                chat_id=int(data["chat_id"]),
                messages_total=int(data.get("messages_total", 0)),
                summarized_upto=int(data.get("summarized_upto", 0)),
                summaries_made=int(data.get("summaries_made", 0)),
                created_at=ts("created_at"),
                updated_at=ts("updated_at"),
                last_summary_at=ts("last_summary_at"),
                settings=dict(data.get("settings") or {}),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptRecord(str(exc)) from None


@dataclass(frozen=True, slots=True)
class Summary:
    """The rolling summary and the range of messages (by seq) it covers."""

    text: str
    covers_from: int
    covers_to: int
    ts: datetime = field(default_factory=utcnow)

    def to_json(self) -> str:
        data = {
            "ts": iso(self.ts),
            "covers_from": self.covers_from,
            "covers_to": self.covers_to,
            "text": self.text,
        }
        return json.dumps(data, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class ChatContext:
    """Everything a turn reads before calling the model, fetched in one go."""

    history: list[Message]
    summary: str
    meta: ChatMeta
    facts: list[str] = field(default_factory=list)
