"""Reading a JSON Lines message archive (messages.txt): its tail, backwards and cheaply, and
the whole of it, forwards in batches. Blocking: callers run these in worker threads.

A line that cannot be read (torn by a crash, or corrupt) is skipped with a warning.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from membot.durable import ends_torn
from membot.errors import UNREADABLE
from membot.memory.contract.models import CorruptRecord, Message, loads

log = logging.getLogger(__name__)

_BLOCK = 64 * 1024
_FIRST_BLOCK = 4 * 1024
_SCAN = 4 * 1024  # a seek by seq bisects down to this many bytes, then scans


def read_small(path: Path) -> bytes:
    """A small file's bytes; FileNotFoundError if it is not there. Plain os.open/os.read, as
    the archive's tail reads are: a turn reads four files and needs no buffered file objects.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, _BLOCK):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: Path) -> str:
    # A damaged byte in summary.txt costs a replacement character, not the turn.
    try:
        return read_small(path).decode("utf-8", errors="replace").strip()
    except FileNotFoundError:
        return ""


def read_tail(path: Path, limit: int) -> list[Message]:
    """The last `limit` readable messages, oldest first."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    try:
        return tail_of(fd, limit, path)[0]
    finally:
        os.close(fd)


class Unread:
    """Not known: to be read from the archive."""


UNREAD = Unread()


def last_of(
    fd: int, path: Path, kept: Message | Unread | None = UNREAD
) -> tuple[Message | None, bool, os.stat_result]:
    """An open archive's last readable message, whether its last line is torn, and its stat.
    `kept`: the last message as the caller keeps it (None: none), not read and parsed again;
    only the last byte is read, for the torn line."""
    if isinstance(kept, Unread):
        tail, torn, _ = tail_of(fd, 1, path)
        return (tail[0] if tail else None), torn, os.fstat(fd)
    st = os.fstat(fd)
    return kept, ends_torn(fd, st.st_size), st


def tail_of(fd: int, limit: int, path: Path) -> tuple[list[Message], bool, int]:
    """The last `limit` readable messages of an open archive, reading backwards from the end;
    also whether its last line is torn (no final newline: a crash mid-write) and its size.

    Blocks start small and grow, so a 20-message window or the last seq costs a few KiB of
    reading and splitting, not a whole block, however long the archive is.
    """
    end = os.fstat(fd).st_size
    pos = end
    step = _FIRST_BLOCK
    carry = b""
    found: list[Message] = []
    unterminated = False
    first = True
    while pos > 0 and len(found) < limit:
        step = min(step, pos)
        pos -= step
        chunk = os.pread(fd, step, pos)
        if pos + step == end:
            unterminated = not chunk.endswith(b"\n")
        lines = (chunk + carry).split(b"\n")
        # The first piece may be the end of a line that starts in an earlier block.
        carry = lines.pop(0) if pos > 0 else b""
        for raw in reversed(lines):
            if len(found) >= limit:
                break
            message = parse_line(raw, path, torn=first and unterminated)
            first = False
            if message is not None:
                found.append(message)
        step = min(step * 4, _BLOCK)
    if carry and len(found) < limit:
        message = parse_line(carry, path, torn=first and unterminated)
        if message is not None:
            found.append(message)
    found.reverse()
    return found, unterminated, end


def _seek_after_seq(fh: Any, after_seq: int) -> None:
    """Position `fh` at the first line whose seq is > after_seq, by bisecting byte offsets.

    Sequence numbers grow along the file, so this costs O(log n) reads, not a full scan; the
    last few KiB are scanned line by line, reading each line's seq alone (a summary every 20
    messages seeks so: scanning 64 KiB of whole messages cost ~4 ms).
    """
    lo = 0
    hi = fh.seek(0, os.SEEK_END)
    # Invariant: every line starting before `lo` has seq <= after_seq; lines from `hi` on are
    # not yet known. Stop when the window is small and scan forward from `lo`.
    while hi - lo > _SCAN:
        mid = (lo + hi) // 2
        fh.seek(mid)
        fh.readline()  # skip to the start of the next line
        start = fh.tell()
        seq = None
        while seq is None and fh.tell() < hi:
            seq = _seq_of(fh.readline())
        if seq is None or seq > after_seq:
            hi = mid
        else:
            lo = start
    fh.seek(lo)
    while True:
        pos = fh.tell()
        raw = fh.readline()
        if not raw:
            return
        seq = _seq_of(raw)
        if seq is not None and seq > after_seq:
            fh.seek(pos)
            return


def _seq_of(raw: bytes) -> int | None:
    """A line's seq, None for a line that cannot be read (skipped, as readers skip it)."""
    try:
        return int(loads(raw)["seq"])
    except UNREADABLE:
        return None


def parse_line(raw: bytes, path: Path, *, torn: bool) -> Message | None:
    if not raw.strip():
        return None
    try:
        return Message.from_json(raw)
    except CorruptRecord as exc:
        what = "torn last line" if torn else "corrupt line"
        log.warning("skipping a %s in %s (%s)", what, path, exc)
        return None


class ForwardReader:
    """Reads messages.txt front to back in batches, for archive scans."""

    def __init__(self, path: Path, batch_bytes: int = 1 << 20, after_seq: int = 0) -> None:
        self.path = path
        self.batch_bytes = batch_bytes
        self.after_seq = after_seq
        self._fh: Any = None
        self._carry = b""
        self._done = False

    @property
    def done(self) -> bool:
        """The end was reached: the next batch would be empty (no need to ask for it)."""
        return self._done

    def next_batch(self) -> list[Message]:
        if self._done:
            return []
        if self._fh is None:
            try:
                self._fh = open(self.path, "rb")  # noqa: SIM115 - closed in close()
            except FileNotFoundError:
                self._done = True
                return []
            if self.after_seq > 0:
                _seek_after_seq(self._fh, self.after_seq)
        out: list[Message] = []
        while not out and not self._done:
            chunk = self._fh.read(self.batch_bytes)
            # A short read is the end of the file: said now, so that the caller does not ask
            # (a worker thread's hop) for an empty batch.
            self._done = len(chunk) < self.batch_bytes
            lines = (self._carry + chunk).split(b"\n")
            self._carry = lines.pop()
            if self._done and self._carry:
                lines.append(self._carry)  # a last line without its newline: torn, maybe
                self._carry = b""
                torn = len(lines) - 1
            else:
                torn = -1
            parsed = (parse_line(r, self.path, torn=i == torn) for i, r in enumerate(lines))
            out.extend(m for m in parsed if m and m.seq > self.after_seq)
        return out

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def iter_lines_sync(path: Path, after_seq: int = 0) -> Iterator[Message]:
    """Synchronous archive scan for offline tools (benchmarks, operator commands)."""
    reader = ForwardReader(path, after_seq=after_seq)
    try:
        while batch := reader.next_batch():
            yield from batch
    finally:
        reader.close()


def last_summary_upto(path: Path) -> int:
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return 0
    for raw in reversed(lines):
        try:
            return int(json.loads(raw)["covers_to"])
        except (ValueError, KeyError, TypeError):
            log.warning("skipping a corrupt line in %s", path)
    return 0
