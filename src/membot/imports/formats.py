"""One conversation of another assistant's data export, as membot keeps it: its messages in
order, each with its role, text, date and a stable origin id.

ChatGPT (`conversations.json` of "Export data"): a conversation is a tree, `mapping` (node id
→ {message, parent, children}); an edited question or a regenerated answer starts a branch,
and `current_node` is the leaf the user last saw. Only that branch is taken, walked from
`current_node` up through the parents. System, tool and hidden messages, and the assistant's
calls to its tools (`recipient` other than "all"), are left out; a part that is not text (an
image) is a marker.

Claude (`conversations.json` of "Export data"): `chat_messages` in order, `sender` "human" or
"assistant", the text in `content` (or `text`). Where messages name their parent
(`parent_message_uuid`), the branch ending at the last message is taken.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from membot.errors import MembotError

Role = Literal["user", "assistant"]
MAX_TITLE = 80


class NotAnExport(MembotError, ValueError):
    """The file is readable, but not a ChatGPT or Claude export's conversations."""


@dataclass(frozen=True, slots=True)
class Said:
    """One message of an imported conversation."""

    origin: str  # "<source>:<conversation id>:<message id>"
    role: Role
    text: str
    ts: datetime


@dataclass(frozen=True, slots=True)
class Thread:
    """One imported conversation."""

    source: str  # "chatgpt" | "claude"
    title: str
    messages: tuple[Said, ...]

    @property
    def label(self) -> str:
        """How its messages name where they came from (their `name` in the archive)."""
        brand = "ChatGPT" if self.source == "chatgpt" else "Claude"
        return f"{brand}: {self.title}" if self.title else brand


def thread_of(conversation: Any) -> Thread:
    """A conversation of either export; NotAnExport for anything else."""
    if isinstance(conversation, Mapping):
        try:
            if isinstance(conversation.get("mapping"), Mapping):
                return _chatgpt(conversation)
            if isinstance(conversation.get("chat_messages"), list):
                return _claude(conversation)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise NotAnExport(f"a conversation cannot be read: {type(exc).__name__}") from None
    raise NotAnExport("not a ChatGPT or Claude conversation")


def _title(value: Any) -> str:
    title = " ".join(str(value or "").split())
    return title if len(title) <= MAX_TITLE else title[: MAX_TITLE - 1].rstrip() + "…"


def _epoch(value: Any) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return datetime.fromtimestamp(float(value), UTC)
    return None


def _chatgpt(conversation: Mapping[str, Any]) -> Thread:
    mapping: Mapping[str, Any] = conversation["mapping"]
    conv_id = str(conversation.get("conversation_id") or conversation.get("id") or "")
    if not conv_id:
        raise ValueError("no conversation id")
    when = _epoch(conversation.get("create_time")) or _epoch(conversation.get("update_time"))
    chain: list[Mapping[str, Any]] = []
    node_id = conversation.get("current_node")
    if node_id not in mapping:
        node_id = _last_leaf(mapping)
    seen: set[str] = set()
    while isinstance(node_id, str) and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id]
        chain.append(node)
        node_id = node.get("parent")
    said: list[Said] = []
    for node in reversed(chain):
        message = node.get("message")
        if not isinstance(message, Mapping):
            continue
        role = (message.get("author") or {}).get("role")
        metadata = message.get("metadata") or {}
        if role not in ("user", "assistant") or message.get("recipient", "all") != "all":
            continue
        if metadata.get("is_visually_hidden_from_conversation"):
            continue
        text = _chatgpt_text(message.get("content"))
        when = _epoch(message.get("create_time")) or when
        if not text or when is None:
            continue
        msg_id = str(message.get("id") or node.get("id"))
        said.append(Said(f"chatgpt:{conv_id}:{msg_id}", role, text, when))
    return Thread("chatgpt", _title(conversation.get("title")), tuple(said))


def _last_leaf(mapping: Mapping[str, Any]) -> str | None:
    """Without `current_node`: from the root, the last child each time."""
    roots = [key for key, node in mapping.items() if node.get("parent") not in mapping]
    node_id = roots[0] if roots else None
    while node_id is not None and mapping[node_id].get("children"):
        node_id = mapping[node_id]["children"][-1]
        if node_id not in mapping:
            return None
    return node_id


def _chatgpt_text(content: Any) -> str:
    if not isinstance(content, Mapping):
        return ""
    parts = content.get("parts")
    if isinstance(parts, list):
        pieces = []
        for part in parts:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, Mapping):
                kind = str(part.get("content_type") or "")
                pieces.append("[image]" if "image" in kind else "[attachment]")
        return "\n".join(p for p in pieces if p.strip()).strip()
    text = content.get("text")
    return text.strip() if isinstance(text, str) else ""


def _claude(conversation: Mapping[str, Any]) -> Thread:
    conv_id = str(conversation["uuid"])
    messages = [m for m in conversation["chat_messages"] if isinstance(m, Mapping)]
    said: list[Said] = []
    for message in _claude_branch(messages):
        sender = message.get("sender")
        role: Role | None = {"human": "user", "assistant": "assistant"}.get(str(sender))  # type: ignore[assignment]
        text = _claude_text(message)
        stamp = message.get("created_at")
        if role is None or not text or not isinstance(stamp, str):
            continue
        when = datetime.fromisoformat(stamp)
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        said.append(Said(f"claude:{conv_id}:{message['uuid']}", role, text, when))
    return Thread("claude", _title(conversation.get("name")), tuple(said))


def _claude_branch(messages: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    by_id = {str(m.get("uuid")): m for m in messages}
    if not messages or not all("parent_message_uuid" in m for m in messages):
        return messages
    chain: list[Mapping[str, Any]] = []
    current: Mapping[str, Any] | None = messages[-1]
    while current is not None and len(chain) <= len(messages):
        chain.append(current)
        current = by_id.get(str(current.get("parent_message_uuid")))
    return chain[::-1]


def _claude_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        texts = [
            str(part.get("text") or "")
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        ]
        joined = "\n".join(t for t in texts if t.strip()).strip()
        if joined:
            return joined
    text = message.get("text")
    return text.strip() if isinstance(text, str) else ""
