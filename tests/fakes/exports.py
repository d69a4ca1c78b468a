"""Data exports of other assistants, in their real formats, for /import's tests and bench.

ChatGPT ("Settings → Data controls → Export data"): a ZIP with `conversations.json` (a list of
conversations, each a tree of nodes in `mapping`, `current_node` the leaf last shown), beside
`chat.html`, `user.json` and `message_feedback.json`. Claude ("Settings → Privacy → Export
data"): a ZIP with `conversations.json` (a list of conversations with `chat_messages`),
`users.json` and `projects.json`.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime


@dataclass(frozen=True)
class Turn:
    role: str  # "user" | "assistant" | "system" | "tool"
    text: str
    at: datetime
    id: str = ""
    # An assistant's call to a tool (ChatGPT's `recipient`): never imported.
    recipient: str = "all"
    hidden: bool = False


@dataclass
class Chat:
    """One conversation: `active` is the branch the user last saw; `abandoned[i]` is a branch
    that forks where active[i] is (a regenerated answer, an edited question)."""

    id: str
    title: str
    active: list[Turn]
    abandoned: dict[int, list[Turn]] = field(default_factory=dict)


def _node_id(chat: Chat, turn: Turn, n: int, branch: str) -> str:
    return turn.id or f"{chat.id}-{branch}{n}"


def _message(node: str, turn: Turn) -> dict[str, object]:
    metadata: dict[str, object] = {"model_slug": "gpt-4o"} if turn.role == "assistant" else {}
    if turn.hidden:
        metadata["is_visually_hidden_from_conversation"] = True
    return {
        "id": node,
        "author": {"role": turn.role, "name": None, "metadata": {}},
        "create_time": turn.at.timestamp(),
        "update_time": None,
        "content": {"content_type": "text", "parts": [turn.text]},
        "status": "finished_successfully",
        "end_turn": turn.role == "assistant",
        "weight": 1.0,
        "metadata": metadata,
        "recipient": turn.recipient,
        "channel": None,
    }


def chatgpt_conversation(chat: Chat) -> dict[str, object]:
    root = f"{chat.id}-root"
    mapping: dict[str, dict[str, object]] = {
        root: {"id": root, "message": None, "parent": None, "children": []}
    }

    def add(parent: str, node: str, turn: Turn) -> None:
        mapping[node] = {
            "id": node,
            "message": _message(node, turn),
            "parent": parent,
            "children": [],
        }
        children = mapping[parent]["children"]
        assert isinstance(children, list)
        children.append(node)

    chain = [root]
    for n, turn in enumerate(chat.active):
        for b, other in enumerate(chat.abandoned.get(n, [])):  # an older sibling, then left
            parent = chain[-1] if b == 0 else f"{chat.id}-x{n}-{b - 1}"
            add(parent, f"{chat.id}-x{n}-{b}", other)
        node = _node_id(chat, turn, n, "a")
        add(chain[-1], node, turn)
        chain.append(node)
    first = chat.active[0].at.timestamp()
    return {
        "title": chat.title,
        "create_time": first,
        "update_time": chat.active[-1].at.timestamp(),
        "mapping": mapping,
        "moderation_results": [],
        "current_node": chain[-1],
        "plugin_ids": None,
        "conversation_id": chat.id,
        "conversation_template_id": None,
        "gizmo_id": None,
        "is_archived": False,
        "safe_urls": [],
        "default_model_slug": "gpt-4o",
        "id": chat.id,
    }


def chatgpt_json(chats: Sequence[Chat]) -> bytes:
    # Newest first, as ChatGPT writes it.
    ordered = sorted(chats, key=lambda c: c.active[-1].at, reverse=True)
    return json.dumps([chatgpt_conversation(c) for c in ordered]).encode()


def chatgpt_zip(chats: Sequence[Chat]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", chatgpt_json(chats))
        archive.writestr("chat.html", "<html><body>the same conversations</body></html>")
        archive.writestr("user.json", json.dumps({"id": "user-1", "email": "a@example.com"}))
        archive.writestr("message_feedback.json", "[]")
    return buffer.getvalue()


def claude_conversation(chat: Chat) -> dict[str, object]:
    """Claude's format; `abandoned` branches are written with parent links, as newer exports
    have them, the active branch last."""
    messages: list[dict[str, object]] = []
    root = "00000000-0000-4000-8000-000000000000"
    parent = root
    parents: list[str] = [root]
    for n, turn in enumerate(chat.active):
        if turn.recipient != "all":  # Claude's exports hold no calls to tools
            continue
        for b, other in enumerate(chat.abandoned.get(n, [])):
            messages.append(_claude_message(f"{chat.id}-x{n}-{b}", other, parents[-1]))
        node = turn.id or f"{chat.id}-m{n}"
        messages.append(_claude_message(node, turn, parent))
        parent = node
        parents.append(node)
    # The abandoned branches first, the active one last: its last message is the leaf.
    active = [m for m in messages if not str(m["uuid"]).startswith(f"{chat.id}-x")]
    others = [m for m in messages if str(m["uuid"]).startswith(f"{chat.id}-x")]
    return {
        "uuid": chat.id,
        "name": chat.title,
        "created_at": _iso(chat.active[0].at),
        "updated_at": _iso(chat.active[-1].at),
        "account": {"uuid": "acct-1"},
        "chat_messages": others + active,
    }


def _claude_message(uuid: str, turn: Turn, parent: str) -> dict[str, object]:
    sender = {"user": "human", "assistant": "assistant"}.get(turn.role, turn.role)
    return {
        "uuid": uuid,
        "text": turn.text,
        "content": [
            {
                "start_timestamp": _iso(turn.at),
                "stop_timestamp": _iso(turn.at),
                "type": "text",
                "text": turn.text,
                "citations": [],
            }
        ],
        "sender": sender,
        "created_at": _iso(turn.at),
        "updated_at": _iso(turn.at),
        "attachments": [],
        "files": [],
        "parent_message_uuid": parent,
    }


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def claude_json(chats: Sequence[Chat]) -> bytes:
    return json.dumps([claude_conversation(c) for c in chats]).encode()


def claude_zip(chats: Sequence[Chat]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", claude_json(chats))
        archive.writestr("users.json", json.dumps([{"uuid": "acct-1"}]))
        archive.writestr("projects.json", "[]")
    return buffer.getvalue()
