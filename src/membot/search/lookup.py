"""Reading a chat's index for a query: the best rows, best first, as SearchHits.

store.query is this module's query (the name the rest of membot uses).
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path

from membot.memory.contract.models import iso, parse_iso
from membot.search.db import connect
from membot.search.hits import SearchHit
from membot.search.period import utc
from membot.search.schema import ENTRY_IDS, OWN_RANK

HIT_COLUMNS = "m.seq, m.ts, m.role, m.name, m.content, m.id, m.kind, m.upto"
# `own`: the score of the row's own words (and sender) alone; 0 when only its neighbours'
# words matched. Computed for the rows returned only.
_QUERY = f"""
SELECT {HIT_COLUMNS}, r.score, r.own
FROM (
    SELECT rowid AS id, -rank AS score, -{OWN_RANK.format(table="terms")} AS own
    FROM terms WHERE terms MATCH ? ORDER BY rank LIMIT ?
) AS r
JOIN messages AS m ON m.id = r.id
ORDER BY r.score DESC, m.seq DESC
"""
# A period: the rows outside it are dropped before the best are picked. CROSS JOIN keeps the
# full-text match the outer loop (one lookup of a ts per match): scanning a long period's
# rows and matching each would be far slower.
_QUERY_PERIOD = f"""
SELECT {HIT_COLUMNS}, -t.rank AS score, -{OWN_RANK.format(table="t.terms")} AS own
FROM terms AS t CROSS JOIN messages AS m
WHERE t.terms MATCH ? AND m.id = t.rowid AND m.ts >= ? AND m.ts < ?
ORDER BY t.rank, m.seq DESC LIMIT ?
"""
# Far outside any archive's dates, and in the same text form as iso().
_EARLIEST = "0001-01-01T00:00:00.000Z"
_LATEST = "9999-12-31T23:59:59.999Z"


def query(
    path: Path,
    match: str,
    limit: int,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[SearchHit]:
    """The best `limit` rows for an FTS5 MATCH expression, best first; with since (inclusive)
    and/or until (exclusive), only rows dated in that period. Naive datetimes are UTC.

    A message found only through its neighbour columns, next to a message found by its own
    words, is left out: it is that message's neighbour, which whoever shows a hit in its
    context shows anyway, and it would take the place of a hit of its own (and a long message
    must not be outranked by its short neighbours, whose columns hold only its first words)."""
    conn = connect(path)
    try:
        # Twice as many candidates: room for the ones left out.
        if since is None and until is None:
            rows = conn.execute(_QUERY, (match, 2 * limit)).fetchall()
        else:
            period = (_bound(since, _EARLIEST), _bound(until, _LATEST))
            rows = conn.execute(_QUERY_PERIOD, (match, *period, 2 * limit)).fetchall()
        ranked = [(hit_from_row(*row[:9]), bool(row[9])) for row in rows]
        # The messages found by their own words: the sources of their neighbours' matches.
        own = {hit.seq for hit, mine in ranked if mine and hit.kind == "message"}
        hits = [
            hit
            for hit, mine in ranked
            if mine or hit.kind != "message" or not own & _beside(conn, hit.seq)
        ][:limit]
        return hits
    finally:
        conn.close()


def _beside(conn: sqlite3.Connection, seq: int) -> set[int]:
    """The indexed messages just before and after `seq` (tool results are not indexed)."""
    before = conn.execute("SELECT MAX(id) FROM messages WHERE id > 0 AND id < ?", (seq,))
    after = conn.execute("SELECT MIN(id) FROM messages WHERE id > ? AND id < ?", (seq, ENTRY_IDS))
    return {int(row[0]) for row in (before.fetchone(), after.fetchone()) if row[0] is not None}


def _bound(when: datetime | None, default: str) -> str:
    if when is None:
        return default
    return iso(utc(when))


def hit_from_row(
    seq: int,
    ts: str,
    role: str,
    name: str | None,
    content: str,
    rowid: int,
    kind: str | None,
    upto: int | None,
    score: float,
) -> SearchHit:
    """A SearchHit from a row of HIT_COLUMNS and its score."""
    if kind is None:
        kind = "document" if rowid < 0 else "message"
    return SearchHit(
        int(seq),
        parse_iso(ts),
        str(role),
        name,
        str(content),
        float(score),
        kind=kind,
        covers=(int(seq), int(upto)) if upto is not None else None,
    )
