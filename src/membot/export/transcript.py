"""The readable parts of an export: conversation.md (each message with its date and who wrote
it), summary.md, facts.json and tasks.json. messages.jsonl is the archive's own lines."""

from __future__ import annotations

import json
from datetime import datetime

from membot.export.cut import Cut
from membot.memory.contract.models import Message

ASSISTANT = "membot"
_TIME = "%Y-%m-%d %H:%M"


def when(ts: datetime, cut: Cut) -> str:
    return ts.astimezone(cut.zone).strftime(_TIME)


def sender(message: Message) -> str:
    if message.role == "assistant":
        return ASSISTANT
    if message.name:
        return message.name
    return f"user {message.user_id}" if message.user_id is not None else "user"


def heading(cut: Cut) -> str:
    zone = cut.zone.key
    return (
        f"# Conversation {cut.cid}\n\n"
        f"Exported {when(cut.taken, cut)} ({zone}): messages 1 to {cut.upto}. "
        f"Times are in {zone}. Tool calls and their results are in messages.jsonl only.\n\n"
    )


def block(message: Message, cut: Cut) -> str:
    """One message of conversation.md; "" for what the transcript leaves out (tool results,
    a tool call with nothing said beside it)."""
    if message.role == "tool":
        return ""
    text = message.with_sources().strip()
    lines = []
    for attachment in message.attachments:
        name = f" {attachment.name}" if attachment.name else ""
        label = attachment.kind.replace("_", " ") + name
        lines.append(f"[{label}](files/{attachment.file})" if attachment.file else f"[{label}]")
    if text:
        lines.append(text)
    if message.stopped:
        lines.append("*(stopped while it was written)*")
    if not lines:
        return ""
    return f"**{sender(message)}** · {when(message.ts, cut)}\n\n" + "\n\n".join(lines) + "\n\n"


def summary_md(cut: Cut) -> str:
    if not cut.summary:
        return "# Summary\n\nNo summary has been made of this conversation yet.\n"
    return f"# Summary\n\nOf messages 1 to {cut.summarized_upto}.\n\n{cut.summary.strip()}\n"


def facts_json(cut: Cut) -> str:
    return json.dumps(list(cut.facts), ensure_ascii=False, indent=2) + "\n"


def tasks_json(cut: Cut) -> str:
    tasks = [task.to_dict() for task in cut.tasks]
    return json.dumps(tasks, ensure_ascii=False, indent=2) + "\n"
