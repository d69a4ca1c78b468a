"""What a chat's memory is made of. Plain dataclasses: every backend stores the same records."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import orjson

from membot.clock import iso as iso
from membot.clock import parse_iso as parse_iso
from membot.clock import utc_now
from membot.errors import UNREADABLE, MembotError
from membot.ids import ConversationId
from membot.memory.contract.attachment import Attachment
from membot.memory.contract.citation import Citation
from membot.memory.contract.delivery import Delivery
from membot.memory.contract.sources import SOURCES_HEAD as SOURCES_HEAD
from membot.memory.contract.sources import Source as Source
from membot.memory.contract.sources import sources_text as sources_text
from membot.memory.contract.state import ConversationState, opt_int, opt_str

Role = Literal["user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"user", "assistant", "tool"})


# Characters that str.splitlines() (and so many a reader of a JSON Lines file) ends a line at,
# which json.dumps(ensure_ascii=False) leaves raw: escaped, so one record stays one line.
_LINE_BREAKS = str.maketrans({c: f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"})


def json_line(data: Any) -> str:
    """`data` as one line of JSON Lines: UTF-8 kept readable, every line break escaped."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.translate(_LINE_BREAKS)


def loads(line: str | bytes) -> Any:
    """A stored line's JSON: orjson (several times quicker on the lines every turn reads), the
    standard library for what it refuses (a lone surrogate's escape, NaN) and so for errors;
    an integer past 64 bits orjson reads as a float (no record membot writes holds one)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


class CorruptRecord(MembotError, ValueError):
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
    ts: datetime = field(default_factory=utc_now)
    seq: int = 0
    user_id: int | None = None
    name: str | None = None
    tg_message_id: int | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None
    # The conversation's state as this turn left it, on the turn's last message only when the
    # turn changed it: written by the same append as the turn, so the two cannot part.
    state: ConversationState | None = None
    # What the message carried besides its text (memory/contract/attachment.py): metadata and file
    # keys only, never bytes. An archive line without it reads as before.
    attachments: tuple[Attachment, ...] = ()
    # An answer the user stopped (Telegram's Stop button) while it was written: the content
    # is what was written until then. Kept only when true; a line without it was not stopped.
    stopped: bool = False
    # How a Telegram answer is sent (memory/contract/delivery.py): on the turn's answer, so one that
    # was stored but not sent when the process died is sent by the next one.
    delivery: Delivery | None = None
    # The question of a task's turn: the firing it carried out ("<task id>@<due>",
    # schedule/models.py), so a firing that was answered is never answered again.
    task: str | None = None
    # A question asked from another chat through Guest Mode (Bot API 10.0): the guest query's
    # id, so the private chat knows it happened and a query answered once is not answered again.
    guest: str | None = None
    # An answer's sources (the pages a web search found that it cites), in order, each once.
    sources: tuple[Source, ...] = ()
    # Brought in by /import from another assistant's export ("chatgpt:<conversation id>:<message
    # id>", "claude:…"): searchable, never replayed into the window or the summary.
    origin: str | None = None
    # The archive's messages an answer cites (memory/contract/citation.py), in order, each once.
    citations: tuple[Citation, ...] = ()
    # Forgotten (/forget): a tombstone keeping the seq's slot; its words and files are gone.
    forgotten: bool = False

    def tombstone(self) -> Message:
        """This message forgotten: who, when and where kept, nothing of what it said (an
        imported message's name, its conversation's title, is something it said)."""
        return replace(
            self,
            name=None if self.origin is not None else self.name,
            content="",
            tool_calls=(),
            attachments=(),
            stopped=False,
            delivery=None,
            sources=(),
            citations=(),
            forgotten=True,
        )

    def with_sources(self) -> str:
        """The content followed by its sources as text (sources_text), or the content."""
        if not self.sources:
            return self.content
        note = sources_text(self.sources)
        return f"{self.content}\n\n{note}" if self.content else note

    def to_json(self) -> str:
        data: dict[str, Any] = {"seq": self.seq, "ts": iso(self.ts), "role": self.role}
        data["content"] = self.content
        for key in ("user_id", "name", "tg_message_id", "tool_call_id", "task", "origin", "guest"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        if self.tool_calls:
            data["tool_calls"] = list(self.tool_calls)
        if self.attachments:
            data["attachments"] = [a.to_dict() for a in self.attachments]
        if self.stopped:
            data["stopped"] = True
        if self.state is not None:
            data["state"] = self.state.to_dict()
        if self.delivery is not None:
            data["delivery"] = self.delivery.to_dict()
        if self.sources:
            data["sources"] = [source.to_dict() for source in self.sources]
        if self.citations:
            data["citations"] = [citation.to_dict() for citation in self.citations]
        if self.forgotten:
            data["forgotten"] = True
        return json_line(data)

    @classmethod
    def from_json(cls, line: str | bytes) -> Message:
        try:
            data = loads(line)
            role = data["role"]
            if role not in ROLES or not isinstance(data["content"], str):
                raise ValueError("bad role or content")
            return cls(
                role=role,
                content=data["content"],
                ts=parse_iso(data["ts"]),
                seq=int(data["seq"]),
                user_id=opt_int(data.get("user_id")),
                name=data.get("name"),
                tg_message_id=opt_int(data.get("tg_message_id")),
                tool_calls=tuple(data.get("tool_calls") or ()),
                tool_call_id=data.get("tool_call_id"),
                state=ConversationState.from_dict(data["state"]) if "state" in data else None,
                attachments=tuple(Attachment.from_dict(a) for a in data.get("attachments") or ()),
                stopped=data.get("stopped") is True,
                delivery=Delivery.from_dict(data["delivery"]) if "delivery" in data else None,
                task=opt_str(data.get("task")),
                guest=opt_str(data.get("guest")),
                sources=tuple(Source.from_dict(s) for s in data.get("sources") or ()),
                origin=opt_str(data.get("origin")),
                citations=tuple(Citation.from_dict(c) for c in data.get("citations") or ()),
                forgotten=data.get("forgotten") is True,
            )
        except UNREADABLE as exc:
            raise CorruptRecord(str(exc)) from None


def _opt_iso(ts: datetime | None) -> str | None:
    return iso(ts) if ts else None


@dataclass(slots=True)
class ChatMeta:
    """meta.json: counters, timestamps, the generation and the conversation's state.

    `generation` names one life of the conversation: it is made at its first write and a
    reset ends it, so a summary made for an earlier life is recognised and dropped.
    `state_seq` is the archive position the state was written at: a turn's state also rides
    on the turn's last message, and wins over meta when it is newer (a crash between the
    append and the meta write).
    """

    conversation: ConversationId
    messages_total: int = 0
    summarized_upto: int = 0  # seq of the last message the current summary covers
    summaries_made: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    last_summary_at: datetime | None = None
    generation: str = ""
    state: ConversationState = field(default_factory=ConversationState)
    state_seq: int = 0
    # Not stored: True for the stand-in meta a storage answers with while it is unreachable
    # (memory/outage/repository.py). Its state is not the conversation's, so nothing may be built on
    # it and written back.
    degraded: bool = field(default=False, compare=False)

    @property
    def unsummarized(self) -> int:
        return max(0, self.messages_total - self.summarized_upto)

    def adopt_turn_state(self, last: Message | None) -> None:
        """Take the state carried by the archive's last message if meta missed it."""
        if last is not None and last.state is not None and last.seq > self.state_seq:
            self.state = last.state
            self.state_seq = last.seq

    def to_dict(self) -> dict[str, Any]:
        # Spelled out rather than dataclasses.asdict, which deep-copies every field: this
        # runs once per turn.
        return {
            "conversation": str(self.conversation),
            "messages_total": self.messages_total,
            "summarized_upto": self.summarized_upto,
            "summaries_made": self.summaries_made,
            "created_at": _opt_iso(self.created_at),
            "updated_at": _opt_iso(self.updated_at),
            "last_summary_at": _opt_iso(self.last_summary_at),
            "generation": self.generation,
            "state": self.state.to_dict(),
            "state_seq": self.state_seq,
            "version": 2,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], conversation: ConversationId) -> ChatMeta:
        """Read meta.json; the conversation id comes from where it was found, not from it."""

        def ts(key: str) -> datetime | None:
            value = data.get(key)
            return parse_iso(value) if value else None

        try:
            created_at = ts("created_at")
            # Version 1 had no generation: its creation time names that life well enough.
            generation = str(data.get("generation") or "")
            if not generation and created_at is not None:
                generation = f"legacy-{iso(created_at)}"
            state = data.get("state")
            return cls(
                conversation=conversation,
                messages_total=int(data.get("messages_total", 0)),
                summarized_upto=int(data.get("summarized_upto", 0)),
                summaries_made=int(data.get("summaries_made", 0)),
                created_at=created_at,
                updated_at=ts("updated_at"),
                last_summary_at=ts("last_summary_at"),
                generation=generation,
                state=ConversationState.from_dict(state) if state else ConversationState(),
                state_seq=int(data.get("state_seq", 0)),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptRecord(str(exc)) from None


@dataclass(frozen=True, slots=True)
class Summary:
    """The rolling summary and the range of messages (by seq) it covers."""

    text: str
    covers_from: int
    covers_to: int
    ts: datetime = field(default_factory=utc_now)

    def to_json(self) -> str:
        data = {
            "ts": iso(self.ts),
            "covers_from": self.covers_from,
            "covers_to": self.covers_to,
            "text": self.text,
        }
        return json_line(data)


@dataclass(frozen=True, slots=True)
class ChatContext:
    """Everything a turn reads before calling the model, fetched in one go."""

    history: list[Message]
    summary: str
    meta: ChatMeta
    facts: list[str] = field(default_factory=list)


def new_generation() -> str:
    """A fresh name for a new life of a conversation (see ChatMeta.generation)."""
    return uuid.uuid4().hex
