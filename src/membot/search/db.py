"""Opening a chat's index file: one connection per call, explicit write transactions, and
telling damage (which a rebuild cures) from other failures."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from membot.private import create_private

# Damage that a rebuild cures; anything else (locked, disk full) is not ours to paper over.
_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
_SIDE_FILES = ("-wal", "-shm", "-journal")


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    return _primary_code(exc) in _CORRUPT_CODES


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    # Extended result codes (e.g. SQLITE_CORRUPT_VTAB) keep the primary code in the low byte.
    return code & 0xFF if isinstance(code, int) else None


def connect(path: Path) -> sqlite3.Connection:
    # The index holds every message in full: created 0600 here, not SQLite's 0644, and its
    # -wal/-shm/-journal files take the main file's mode.
    create_private(path)
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
def write(path: Path) -> Iterator[sqlite3.Connection]:
    """A write transaction: committed when the block ends, rolled back if it raises."""
    conn = connect(path)
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


def use_wal(path: Path) -> None:
    """Switch the file to WAL (readers never wait for the writer), if that can be done now.
    It needs the file to itself: while another process (the bot, an operator's `membot
    search`) is inside a transaction on it, as when both build a new index at once, SQLite
    refuses at once instead of waiting. The index works in SQLite's default journal mode
    meanwhile, and the next search tries again."""
    conn = connect(path)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
    except sqlite3.OperationalError as exc:
        if _primary_code(exc) != sqlite3.SQLITE_BUSY:
            raise
    finally:
        conn.close()


def delete_index(path: Path) -> None:
    for candidate in (path, *(path.with_name(path.name + suffix) for suffix in _SIDE_FILES)):
        with contextlib.suppress(FileNotFoundError):
            candidate.unlink()
