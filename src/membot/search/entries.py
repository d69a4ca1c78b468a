"""Entries: what the chat's memory made of its messages (the rolling summary, the facts the
model kept with `remember`), indexed as rows of their own that point back to the messages
they came from. A hit on one is returned as such (SearchHit.kind, .covers).

The index is a cache: it sees the summary as it is at each catch-up, so it keeps a snapshot
per summary it saw (covering the messages that summary added); a rebuild sees only the
current one, which then covers every summarized message.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence

from membot.memory.contract.models import Message, iso
from membot.search.schema import ENTRY_IDS, INSERT_TERMS, NO_NEIGHBOURS
from membot.search.text import index_fields

SUMMARY = "summary"
FACT = "fact"
# What the model calls to keep a fact (core/tools/builtin.py): tool_names is below search.
REMEMBER_TOOL = "remember"
# How a tool's result says it failed (llm/tools/executor.py): "Error: ..." (full list of 100
# facts, invalid arguments, a timeout).
TOOL_FAILED = "Error:"


def remembered(message: Message) -> Iterator[tuple[str, str]]:
    """(call id, fact) for each fact an assistant message asked `remember` to keep (OpenAI
    tool_calls shape)."""
    if message.role != "assistant":
        return
    for call in message.tool_calls:
        function = call.get("function")
        if not isinstance(function, dict) or function.get("name") != REMEMBER_TOOL:
            continue
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (TypeError, ValueError):
            continue  # the model's malformed call, which the tool refused as well
        fact = arguments.get("fact") if isinstance(arguments, dict) else None
        if isinstance(fact, str) and fact.strip():
            yield str(call.get("id") or ""), " ".join(fact.split())


def add_facts(conn: sqlite3.Connection, messages: Sequence[Message]) -> None:
    """Index the facts kept in `messages`, each pointing at the user message that led to it
    (the nearest indexed one before; the assistant's own when there is none). A call whose
    result is in `messages` and says it failed kept nothing."""
    failed = {
        m.tool_call_id for m in messages if m.role == "tool" and m.content.startswith(TOOL_FAILED)
    }
    for message in messages:
        for call_id, fact in remembered(message):
            if call_id and call_id in failed:
                continue
            row = conn.execute(
                "SELECT id FROM messages WHERE id > 0 AND id < ? AND role = 'user' "
                "ORDER BY id DESC LIMIT 1",
                (message.seq,),
            ).fetchone()
            seq = int(row[0]) if row is not None else message.seq
            _add(conn, FACT, fact, seq, seq, iso(message.ts))


def add_summary(conn: sqlite3.Connection, text: str, last: int) -> None:
    """Index the summary of messages up to `last` as covering the ones after the last summary
    indexed, dated by the last one it covers (so a period finds the summary of what happened
    in it). Once: the state is read again under the write lock, as another process (the bot,
    an operator's `membot search`) may have indexed it meanwhile."""
    (upto,) = conn.execute("SELECT summary_upto FROM state").fetchone()
    if upto >= last:
        return
    row = conn.execute(
        "SELECT ts FROM messages WHERE id > 0 AND id <= ? ORDER BY id DESC LIMIT 1", (last,)
    ).fetchone()
    if row is not None and text.strip():
        _add(conn, SUMMARY, text, upto + 1, last, str(row[0]))
    conn.execute("UPDATE state SET summary_upto = ?", (last,))


def _add(conn: sqlite3.Connection, kind: str, text: str, first: int, last: int, ts: str) -> None:
    top = conn.execute("SELECT id FROM messages ORDER BY id DESC LIMIT 1").fetchone()
    entry = max(int(top[0]) if top else 0, ENTRY_IDS) + 1
    conn.execute(
        "INSERT INTO messages (id, seq, ts, role, name, content, kind, upto) "
        "VALUES (?, ?, ?, 'assistant', NULL, ?, ?, ?)",
        (entry, first, ts, text, kind, last),
    )
    # No sender and no neighbours: an entry stands for its messages, not beside them.
    conn.execute(INSERT_TERMS, (entry, *index_fields(text), "", *NO_NEIGHBOURS))
