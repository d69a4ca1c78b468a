"""A chat's search index file: SQLite FTS5 (BM25) over stemmed text, in worker threads.

Every function opens and closes its own connection (db.py), so a cancelled search can never
leave a connection shared between an abandoned worker thread and the next caller.
HistorySearch (index.py) decides when each runs, under the chat's lock. The layout is in
schema.py, the rows in neighbours.py and entries.py.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from membot.ids import ConversationId
from membot.memory.contract.models import Message, iso
from membot.private import private_dir
from membot.search.db import delete_index, use_wal
from membot.search.db import write as _write
from membot.search.entries import add_facts, add_summary
from membot.search.hits import SearchHit
from membot.search.lookup import HIT_COLUMNS, hit_from_row
from membot.search.lookup import query as query
from membot.search.neighbours import Said, index_messages, tail
from membot.search.schema import (
    CHUNK_IDS,
    INSERT_TERMS,
    NO_NEIGHBOURS,
    SCHEMA,
    SCHEMA_VERSION,
)
from membot.search.text import index_fields, sender_field

log = logging.getLogger(__name__)


class IndexState(NamedTuple):
    """How far the index got: the last indexed seq and the summary's last covered seq."""

    last_seq: int
    summary_upto: int


def prepare(path: Path, cid: ConversationId, generation: str, messages_total: int) -> IndexState:
    """Make the index usable for this generation of the chat; say how far it got."""
    private_dir(path.parent)
    state: IndexState | None = None
    while state is None:
        with _write(path) as conn:
            wal = conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            state = _prepared(conn, cid, generation, messages_total)
        if state is None:
            # Another life of the chat (a reset), or messages forgotten (/forget): the file
            # goes whole, -wal too; tables dropped in it would leave their pages, words and all.
            log.info("%s: the archive changed under the search index; rebuilding", cid)
            delete_index(path)
    if not wal:
        # Outside the transaction (journal_mode cannot change inside one); once is enough.
        use_wal(path)
    return state


def _prepared(
    conn: sqlite3.Connection, cid: ConversationId, generation: str, messages_total: int
) -> IndexState | None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    row = None
    if version == SCHEMA_VERSION:
        row = conn.execute("SELECT generation, last_seq, summary_upto FROM state").fetchone()
    if row is not None and row[0] == generation and row[1] <= messages_total:
        return IndexState(int(row[1]), int(row[2]))
    if row is not None:
        return None  # stale: the caller deletes the file
    log.info("%s: building the search index", cid)
    conn.execute("DROP TABLE IF EXISTS terms")
    conn.execute("DROP TABLE IF EXISTS messages")
    conn.execute("DROP TABLE IF EXISTS state")
    for statement in SCHEMA:
        conn.execute(statement)
    conn.execute("INSERT INTO state (id, generation, last_seq) VALUES (1, ?, 0)", (generation,))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return IndexState(0, 0)


def insert(
    path: Path, messages: Sequence[Message], chunks: Mapping[int, Sequence[str]] | None = None
) -> int:
    """Index a batch in one transaction; return how many messages became searchable.
    `chunks`: the pieces of the documents a message brought (by seq), each a row of its own
    shown as the message's. The facts the batch's `remember` calls kept become entries."""
    with _write(path) as conn:
        # Re-read under the write lock: another process may have indexed these meanwhile.
        (last_seq,) = conn.execute("SELECT last_seq FROM state").fetchone()
        fresh = [m for m in messages if m.seq > last_seq]
        # Tool results are the bot's plumbing, not the conversation; blank texts match nothing.
        said = [m for m in fresh if m.role != "tool" and m.content.strip()]
        before = tail(conn)
        # An answer's sources are part of its text here: a page's title or address finds it,
        # and a hit shows its links (excerpts.py keeps them when it cuts a long one).
        rows = [(m.seq, m, m.with_sources()) for m in said]
        pieces = [
            (-(m.seq * CHUNK_IDS + n), m, piece)
            for m in fresh
            for n, piece in enumerate((chunks or {}).get(m.seq, ())[: CHUNK_IDS - 1], 1)
        ]
        conn.executemany(
            "INSERT INTO messages (id, seq, ts, role, name, content) VALUES (?, ?, ?, ?, ?, ?)",
            [(i, m.seq, iso(m.ts), m.role, m.name, text) for i, m, text in rows + pieces],
        )
        index_messages(conn, before, [Said(seq, m.name, text) for seq, m, text in rows])
        # A chunk stands alone: a document's pages are not the conversation around it.
        conn.executemany(
            INSERT_TERMS,
            [
                (i, *index_fields(text), sender_field(m.name), *NO_NEIGHBOURS)
                for i, m, text in pieces
            ],
        )
        add_facts(conn, fresh)
        if fresh:
            conn.execute("UPDATE state SET last_seq = ?", (max(m.seq for m in fresh),))
        return len(rows) + len(pieces)


def index_summary(path: Path, text: str, last: int) -> None:
    """Index the chat's summary, made up to message `last`, as an entry (see entries.py)."""
    with _write(path) as conn:
        add_summary(conn, text, last)


# -- what excerpts.py reads around a hit (the budget's side of this file) --------------------

# Only the messages' own rows (id = seq): never a document's pieces or an entry.
_BETWEEN = f"""
SELECT {HIT_COLUMNS}, 0.0 FROM messages AS m
WHERE m.id BETWEEN ? AND ? AND m.id = m.seq ORDER BY m.seq
"""
# The best messages for a query within a range (a summary's), best first.
_BEST_BETWEEN = f"""
SELECT {HIT_COLUMNS}, -t.rank
FROM terms AS t JOIN messages AS m ON m.id = t.rowid
WHERE t.terms MATCH ? AND t.rowid BETWEEN ? AND ? AND m.id = m.seq
ORDER BY t.rank LIMIT ?
"""


@contextlib.contextmanager
def reading(path: Path) -> Iterator[sqlite3.Connection | None]:
    """One read-only connection for many reads (an excerpt's dozens); None when there is no
    index (any more). Read-only: a chat dropped (reset) between a search and this read must
    not get an empty index file back."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
    except sqlite3.OperationalError:
        yield None
        return
    try:
        yield conn
    finally:
        conn.close()


def _rows(source: Path | sqlite3.Connection, sql: str, args: tuple[object, ...]) -> list[SearchHit]:
    if isinstance(source, Path):
        with reading(source) as conn:
            return _rows(conn, sql, args) if conn is not None else []
    return [hit_from_row(*row) for row in source.execute(sql, args).fetchall()]


def messages_between(
    source: Path | sqlite3.Connection, first_seq: int, last_seq: int
) -> list[SearchHit]:
    """The indexed messages with seq first_seq..last_seq, chronological (`source`: the
    index file, or a connection from `reading`)."""
    return _rows(source, _BETWEEN, (max(first_seq, 1), last_seq))


def best_between(
    source: Path | sqlite3.Connection, match: str, first_seq: int, last_seq: int, limit: int
) -> list[SearchHit]:
    """The best `limit` messages for `match` among seq first_seq..last_seq, best first."""
    return _rows(source, _BEST_BETWEEN, (match, max(first_seq, 1), last_seq, limit))
