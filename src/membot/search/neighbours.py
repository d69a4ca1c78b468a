"""What the index stores for each message: its own stems and prefixes, its sender, and the
stems of the messages around it, kept right as messages arrive.

A message's neighbours are the indexed messages next to it in the archive (tool results and
blank messages are not indexed, so they are skipped), whoever wrote them. The fields are a
pure function of the indexed sequence, so a message indexed in one batch and one indexed
message by message get the same row; that is also what lets a contentless FTS5 table forget
a row (it must be told the exact values it was given): they are computed again from
`messages`, which keeps every original text anyway.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from membot.search.schema import DELETE_TERMS, ENTRY_IDS, INSERT_TERMS, NEIGHBOURS
from membot.search.text import index_fields, sender_field, stems

#: How far the neighbour columns reach, before and after; a new message changes the rows of
#: the AHEAD messages before it.
SPAN = max((abs(offset) for offset, _ in NEIGHBOURS), default=0)
AHEAD = max((offset for offset, _ in NEIGHBOURS if offset > 0), default=0)
# A long neighbour would drown the message's own words and bloat the index: its first words
# say what it is about.
NEIGHBOUR_WORDS = 64


@dataclass(frozen=True, slots=True)
class Said:
    """One indexed message: its row id (= seq), sender and text."""

    id: int
    name: str | None
    content: str


def _neighbour(said: Said) -> str:
    return " ".join(stems(said.content)[:NEIGHBOUR_WORDS])


def fields(run: Sequence[Said], i: int, near: Sequence[str]) -> tuple[str, ...]:
    """The columns of run[i]'s row; `near` holds each message's neighbour text, by position."""

    def at(offset: int) -> str:
        return near[i + offset] if 0 <= i + offset < len(run) else ""

    own = index_fields(run[i].content)
    return (*own, sender_field(run[i].name), *(at(offset) for offset, _ in NEIGHBOURS))


def tail(conn: sqlite3.Connection) -> list[Said]:
    """The last indexed messages whose rows a new message changes, and the ones their
    neighbour fields were computed from (SPAN + AHEAD of them), oldest first."""
    rows = conn.execute(
        "SELECT id, name, content FROM messages WHERE id > 0 AND id < ? ORDER BY id DESC LIMIT ?",
        (ENTRY_IDS, SPAN + AHEAD),
    ).fetchall()
    return [Said(int(i), name, str(content)) for i, name, content in reversed(rows)]


def index_messages(conn: sqlite3.Connection, old: Sequence[Said], new: Sequence[Said]) -> None:
    """Write the rows of `new` (appended after `old`, the index's tail()) and rewrite the
    rows of the last AHEAD old messages, whose later neighbours arrive with them."""
    if not new:
        return
    run = [*old, *new]
    near = [_neighbour(said) for said in run]
    changed = range(max(0, len(old) - AHEAD), len(old))
    conn.executemany(
        DELETE_TERMS, [(old[i].id, *fields(old, i, near[: len(old)])) for i in changed]
    )
    rewritten = (*changed, *range(len(old), len(run)))
    conn.executemany(INSERT_TERMS, [(run[i].id, *fields(run, i, near)) for i in rewritten])
