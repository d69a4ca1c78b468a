"""A chat's search index file: SQLite FTS5 (BM25) over stemmed text, in worker threads.

Every function opens and closes its own connection, so a cancelled search can never leave a
connection shared between an abandoned worker thread and the next caller. HistorySearch
(index.py) decides when each runs, under the chat's lock.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from membot.ids import ConversationId
from membot.memory.models import Message, iso, parse_iso
from membot.search.hits import SearchHit
from membot.search.text import (
    PREFIXES_COLUMN,
    SENDER_COLUMN,
    STEMS_COLUMN,
    index_fields,
    sender_field,
)

log = logging.getLogger(__name__)

# Bumped whenever the schema or the text normalization changes: old files are rebuilt.
SCHEMA_VERSION = 3  # 2: the sender column; 3: documents' text in chunks
#: A document's chunks are rows of their own, id -(seq * CHUNK_IDS + n): apart from the
#: messages' rows (id = seq), whatever the archive's length.
CHUNK_IDS = 65_536
# Damage that a rebuild cures; anything else (locked, disk full) is not ours to paper over.
_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
_SIDE_FILES = ("-wal", "-shm", "-journal")
STEMS_WEIGHT = 1.0
PREFIXES_WEIGHT = 0.5
# A message by the person a query names beats one that only addresses them.
SENDER_WEIGHT = 8.0

# Contentless FTS5 table: the stems are only ever matched, and the originals live in
# `messages`. remove_diacritics 0: text.py already decided what a word is, and FTS5 must
# not fold "й" into "и" behind its back.
_SCHEMA = (
    """CREATE TABLE state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        generation TEXT NOT NULL,
        last_seq INTEGER NOT NULL
    )""",
    """CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        seq INTEGER NOT NULL,
        ts TEXT NOT NULL,
        role TEXT NOT NULL,
        name TEXT,
        content TEXT NOT NULL
    )""",
    f"""CREATE VIRTUAL TABLE terms USING fts5(
        {STEMS_COLUMN}, {PREFIXES_COLUMN}, {SENDER_COLUMN}, content='',
        tokenize='unicode61 remove_diacritics 0'
    )""",
    # `rank` (what ORDER BY rank sorts by) is BM25 with per-column weights: a whole-stem
    # match is the real evidence, a shared prefix only backs it up.
    f"""INSERT INTO terms (terms, rank)
        VALUES ('rank', 'bm25({STEMS_WEIGHT}, {PREFIXES_WEIGHT}, {SENDER_WEIGHT})')""",
)

_QUERY = """
SELECT m.seq, m.ts, m.role, m.name, m.content, r.score
FROM (
    SELECT rowid AS id, -rank AS score
    FROM terms WHERE terms MATCH ? ORDER BY rank LIMIT ?
) AS r
JOIN messages AS m ON m.id = r.id
ORDER BY r.score DESC, m.seq DESC
"""


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    # Extended result codes (e.g. SQLITE_CORRUPT_VTAB) keep the primary code in the low byte.
    return isinstance(code, int) and code & 0xFF in _CORRUPT_CODES


def _connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE), never implicit.
    # The timeout covers an operator's `membot search` and the bot indexing the same chat.
    conn = sqlite3.connect(path, timeout=10.0, isolation_level=None)
    try:
        # NORMAL is safe with WAL: a power cut may lose the last commits, which the next
        # search simply indexes again, but it never corrupts the file.
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


@contextlib.contextmanager
def _write(path: Path) -> Iterator[sqlite3.Connection]:
    """A write transaction: committed when the block ends, rolled back if it raises."""
    conn = _connect(path)
    try:
        # IMMEDIATE takes the write lock up front: two indexers never interleave.
        conn.execute("BEGIN IMMEDIATE")
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise
    finally:
        conn.close()


def prepare(path: Path, cid: ConversationId, generation: str, messages_total: int) -> int:
    """Make the index usable for this generation of the chat; return its last indexed seq."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with _write(path) as conn:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        row = None
        if version == SCHEMA_VERSION:
            row = conn.execute("SELECT generation, last_seq FROM state").fetchone()
        if row is not None and row[0] == generation and row[1] <= messages_total:
            return int(row[1])
        if row is None:
            log.info("%s: building the search index", cid)
        else:
            # Another chat lives under this id now (reset), or the archive got shorter.
            log.info("%s: the archive changed under the search index; rebuilding", cid)
        conn.execute("DROP TABLE IF EXISTS terms")
        conn.execute("DROP TABLE IF EXISTS messages")
        conn.execute("DROP TABLE IF EXISTS state")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT INTO state (id, generation, last_seq) VALUES (1, ?, 0)", (generation,))
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    # journal_mode cannot change inside a transaction; it is stored in the file, set once.
    conn = _connect(path)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()
    return 0


def insert(
    path: Path, messages: Sequence[Message], chunks: Mapping[int, Sequence[str]] | None = None
) -> int:
    """Index a batch in one transaction; return how many messages became searchable.
    `chunks`: the pieces of the documents a message brought (by seq), each a row of its own
    shown as the message's."""
    with _write(path) as conn:
        # Re-read under the write lock: another process may have indexed these meanwhile.
        (last_seq,) = conn.execute("SELECT last_seq FROM state").fetchone()
        fresh = [m for m in messages if m.seq > last_seq]
        # Tool results are the bot's plumbing, not the conversation; blank texts match nothing.
        rows = [(m.seq, m, m.content) for m in fresh if m.role != "tool" and m.content.strip()]
        for m in fresh:
            pieces = (chunks or {}).get(m.seq, ())
            rows += [
                (-(m.seq * CHUNK_IDS + n), m, p) for n, p in enumerate(pieces[: CHUNK_IDS - 1], 1)
            ]
        conn.executemany(
            "INSERT INTO messages (id, seq, ts, role, name, content) VALUES (?, ?, ?, ?, ?, ?)",
            [(i, m.seq, iso(m.ts), m.role, m.name, text) for i, m, text in rows],
        )
        conn.executemany(
            f"INSERT INTO terms (rowid, {STEMS_COLUMN}, {PREFIXES_COLUMN}, {SENDER_COLUMN}) "
            "VALUES (?, ?, ?, ?)",
            [(i, *index_fields(text), sender_field(m.name)) for i, m, text in rows],
        )
        if fresh:
            conn.execute("UPDATE state SET last_seq = ?", (max(m.seq for m in fresh),))
        return len(rows)


def query(path: Path, match: str, limit: int) -> list[SearchHit]:
    conn = _connect(path)
    try:
        hits = [_hit(*row) for row in conn.execute(_QUERY, (match, limit)).fetchall()]
        return [_with_context(conn, hit) for hit in hits]
    finally:
        conn.close()


def _hit(seq: int, ts: str, role: str, name: str | None, content: str, score: float) -> SearchHit:
    return SearchHit(int(seq), parse_iso(ts), str(role), name, str(content), float(score))


def _asks(hit: SearchHit) -> bool:
    return hit.content.rstrip().endswith("?")


def _speaker(hit: SearchHit) -> tuple[str, str | None]:
    return (hit.role, hit.name)


def _with_context(conn: sqlite3.Connection, hit: SearchHit) -> SearchHit:
    """A question's answer, or an answer's question, comes with the hit: the words of a
    question often find the question, while the fact is in the reply (and the other way)."""
    rows = conn.execute(
        "SELECT seq, ts, role, name, content, 0 FROM messages WHERE id IN (?, ?) ORDER BY seq",
        (hit.seq - 1, hit.seq + 1),
    ).fetchall()
    near = {h.seq: h for h in (_hit(*row) for row in rows)}
    context = []
    before, after = near.get(hit.seq - 1), near.get(hit.seq + 1)
    if before is not None and _asks(before) and _speaker(before) != _speaker(hit):
        context.append(before)
    if after is not None and _asks(hit) and _speaker(after) != _speaker(hit):
        context.append(after)
    return replace(hit, context=tuple(context)) if context else hit


def delete_index(path: Path) -> None:
    for candidate in (path, *(path.with_name(path.name + suffix) for suffix in _SIDE_FILES)):
        with contextlib.suppress(FileNotFoundError):
            candidate.unlink()


# -- what excerpts.py reads around a hit (the budget's side of this file) --------------------

# Only the messages' own rows (id = seq): never a document's pieces or an entry.
_BETWEEN = """
SELECT seq, ts, role, name, content, 0.0 FROM messages
WHERE id BETWEEN ? AND ? AND id = seq ORDER BY seq
"""
# The best messages for a query within a range (a summary's), best first.
_BEST_BETWEEN = """
SELECT m.seq, m.ts, m.role, m.name, m.content, -t.rank
FROM terms AS t JOIN messages AS m ON m.id = t.rowid
WHERE t.terms MATCH ? AND t.rowid BETWEEN ? AND ? AND m.id = m.seq
ORDER BY t.rank LIMIT ?
"""


def _read(path: Path) -> sqlite3.Connection:
    # Read-only: a chat dropped (reset) between a search and this read must not get an
    # empty index file back.
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)


def _message(row: tuple[int, str, str, str | None, str, float]) -> SearchHit:
    seq, ts, role, name, content, score = row
    return SearchHit(int(seq), parse_iso(ts), str(role), name, str(content), float(score))


def _rows(path: Path, sql: str, args: tuple[object, ...]) -> list[SearchHit]:
    try:
        conn = _read(path)
    except sqlite3.OperationalError:  # no index (any more): nothing around anything
        return []
    try:
        return [_message(row) for row in conn.execute(sql, args).fetchall()]
    finally:
        conn.close()


def messages_between(path: Path, first_seq: int, last_seq: int) -> list[SearchHit]:
    """The indexed messages with seq first_seq..last_seq, chronological."""
    return _rows(path, _BETWEEN, (max(first_seq, 1), last_seq))


def best_between(
    path: Path, match: str, first_seq: int, last_seq: int, limit: int
) -> list[SearchHit]:
    """The best `limit` messages for `match` among seq first_seq..last_seq, best first."""
    return _rows(path, _BEST_BETWEEN, (match, max(first_seq, 1), last_seq, limit))
