"""Ranked search over a chat's whole archive: SQLite FTS5 (BM25) over stemmed text.

The index is a cache of messages.txt, never a source of truth: index_root/<the
conversation's relative path>/search.sqlite3 holds the stems (FTS5), the original messages
to show, and how far it got.
Each search first indexes whatever was appended since, so nothing has to hook into the
write path; a chat that was reset, or an index that is damaged, is rebuilt from the archive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from membot.ids import ConversationId
from membot.locks import KeyedLocks
from membot.memory.base import ChatRepository
from membot.memory.models import Message, iso, parse_iso
from membot.search.text import (
    PREFIXES_COLUMN,
    SENDER_COLUMN,
    STEMS_COLUMN,
    index_fields,
    match_expression,
    sender_field,
)

log = logging.getLogger(__name__)

INDEX_FILE = "search.sqlite3"
MAX_LIMIT = 50
# Bumped whenever the schema or the text normalization changes: old files are rebuilt.
SCHEMA_VERSION = 2  # 2: the sender column
# Messages per write transaction: big enough to amortize the commit, small enough that an
# interrupted first build of a long archive keeps most of its progress.
_BATCH = 2000
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
        seq INTEGER PRIMARY KEY,
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
    SELECT rowid AS seq, -rank AS score
    FROM terms WHERE terms MATCH ? ORDER BY rank LIMIT ?
) AS r
JOIN messages AS m ON m.seq = r.seq
ORDER BY r.score DESC, m.seq DESC
"""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One archived message that matched; a higher score is a better match."""

    seq: int
    ts: datetime
    role: str
    name: str | None
    content: str
    score: float
    # The other half of a question and its answer, when the hit is one half: the message
    # after a question by someone else, or the question before an answer (see _context).
    context: tuple[SearchHit, ...] = ()


class HistorySearch:
    """Searches each chat's whole message archive, keeping one index file per chat."""

    def __init__(self, repository: ChatRepository, index_root: Path | str) -> None:
        self._repository = repository
        self._root = Path(index_root)
        self._lock = KeyedLocks()

    def index_path(self, cid: ConversationId) -> Path:
        # A validated id is the only way to a path: it never comes from user text.
        return self._root / cid.relative_path() / INDEX_FILE

    async def search(self, cid: ConversationId, query: str, limit: int = 5) -> list[SearchHit]:
        """The best `limit` (1..50) messages of the chat for `query`, best first."""
        path = self.index_path(cid)
        match = match_expression(query)
        if match is None:
            return []
        limit = max(1, min(int(limit), MAX_LIMIT))
        started = time.perf_counter()
        async with self._lock(cid):
            try:
                hits = await self._search_locked(cid, path, match, limit)
            except sqlite3.DatabaseError as exc:
                if not _is_damage(exc):
                    raise
                log.warning(
                    "%s: search index is damaged (%s); rebuilding it",
                    cid,
                    exc.sqlite_errorname,
                )
                await asyncio.to_thread(_delete_index, path)
                hits = await self._search_locked(cid, path, match, limit)
        log.debug(
            "%s: search returned %d hits in %.1f ms",
            cid,
            len(hits),
            (time.perf_counter() - started) * 1000,
        )
        return hits

    async def drop(self, cid: ConversationId) -> None:
        """Delete the chat's index (on reset). Safe when there is none."""
        path = self.index_path(cid)
        async with self._lock(cid):
            await asyncio.to_thread(_delete_index, path)

    async def _search_locked(
        self, cid: ConversationId, path: Path, match: str, limit: int
    ) -> list[SearchHit]:
        meta = await self._repository.get_meta(cid)
        if meta.messages_total == 0:
            # Nothing stored (never, or since a reset): nothing to find, and no index file
            # should bring an unknown chat's directory into existence.
            await asyncio.to_thread(_delete_index, path)
            return []
        # A reset conversation starts a new generation: the old index is of a dead past.
        generation = meta.generation
        last_seq = await asyncio.to_thread(_prepare, path, cid, generation, meta.messages_total)
        if last_seq < meta.messages_total:
            # Checked first because even a bisecting seek into a long archive costs a few ms.
            await self._catch_up(cid, path, last_seq)
        return await asyncio.to_thread(_query, path, match, limit)

    async def _catch_up(self, cid: ConversationId, path: Path, last_seq: int) -> None:
        started = time.perf_counter()
        added = 0
        batch: list[Message] = []
        async for message in self._repository.iter_messages(cid, after_seq=last_seq):
            batch.append(message)
            if len(batch) >= _BATCH:
                added += await asyncio.to_thread(_insert, path, batch)
                batch = []
        if batch:
            added += await asyncio.to_thread(_insert, path, batch)
        if added:
            log.debug(
                "%s: indexed %d messages in %.1f ms",
                cid,
                added,
                (time.perf_counter() - started) * 1000,
            )


# -- sync internals (worker threads) ------------------------------------------------------
# Every function opens and closes its own connection, so a cancelled search can never leave
# a connection shared between an abandoned worker thread and the next caller.


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
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


def _prepare(path: Path, cid: ConversationId, generation: str, messages_total: int) -> int:
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


def _insert(path: Path, messages: Sequence[Message]) -> int:
    """Index a batch in one transaction; return how many messages became searchable."""
    with _write(path) as conn:
        # Re-read under the write lock: another process may have indexed these meanwhile.
        (last_seq,) = conn.execute("SELECT last_seq FROM state").fetchone()
        fresh = [m for m in messages if m.seq > last_seq]
        # Tool results are the bot's plumbing, not the conversation; blank texts match nothing.
        rows = [m for m in fresh if m.role != "tool" and m.content.strip()]
        conn.executemany(
            "INSERT INTO messages (seq, ts, role, name, content) VALUES (?, ?, ?, ?, ?)",
            [(m.seq, iso(m.ts), m.role, m.name, m.content) for m in rows],
        )
        conn.executemany(
            f"INSERT INTO terms (rowid, {STEMS_COLUMN}, {PREFIXES_COLUMN}, {SENDER_COLUMN}) "
            "VALUES (?, ?, ?, ?)",
            [(m.seq, *index_fields(m.content), sender_field(m.name)) for m in rows],
        )
        if fresh:
            conn.execute("UPDATE state SET last_seq = ?", (max(m.seq for m in fresh),))
        return len(rows)


def _query(path: Path, match: str, limit: int) -> list[SearchHit]:
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
        "SELECT seq, ts, role, name, content, 0 FROM messages WHERE seq IN (?, ?) ORDER BY seq",
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


def _delete_index(path: Path) -> None:
    for candidate in (path, *(path.with_name(path.name + suffix) for suffix in _SIDE_FILES)):
        with contextlib.suppress(FileNotFoundError):
            candidate.unlink()


# -- for the model ----------------------------------------------------------------------------


def format_hits(hits: Sequence[SearchHit], max_chars_per_hit: int = 500) -> str:
    """Hits as text for the model: one dated, attributed block per message, best first; a
    hit's question or answer follows it, marked as its context."""
    if not hits:
        return "No matching messages found."
    blocks = []
    for hit in hits:
        lines = [_line(hit, max_chars_per_hit)]
        lines += [f"  (context) {_line(near, max_chars_per_hit)}" for near in hit.context]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _line(hit: SearchHit, max_chars: int) -> str:
    when = hit.ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    who = f"{hit.role} ({hit.name})" if hit.name else hit.role
    # One line per message: the model must not mistake a message's own line breaks for a
    # new hit.
    text = " ".join(hit.content.split())
    if len(text) > max_chars:
        text = text[: max(max_chars - 1, 0)].rstrip() + "…"
    return f"[{when}] {who}: {text}"
