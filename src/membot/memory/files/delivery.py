"""The file backend's delivery mark (memory/contract/delivery.py): `undelivered.json` in the
conversation's directory, a record of a fixed size rewritten in place.

The record holds a `DeliveryMark` and the archive (`messages.txt`'s inode, size and
modification time) as it was when the mark was written. The time is there because inodes
are reused: a forget's rewrite frees the archive's inode, and a later rewrite's new file
may get it back, with the size the record holds, while an answer is still unsent.

A stored answer may be unsent while the archive is no longer that one: an append with an
answer to send writes nothing here, since its own synced line makes the archive differ from
the record (so no crash can leave the answer without a mark). Only a conversation's first
answer creates the record, synced (temporary file, rename, the directory's fsync) before
the append's write. Sending an answer changes the record in place, one write of `RECORD`
bytes at offset 0, not synced: a kill -9 finds it in the page cache, and a power cut that
loses it brings back an older record, which may cost a second copy of an answer, never the
answer. Delivered, it records the archive as it is then: nothing pending. Start-up reads
each conversation's record and stats its archive, reading no archive. A record an earlier
version left (no archive in it) means pending.

A write that changes the archive without an answer to send (an append of another kind, a
forget's rewrite) carries a record that said "nothing pending" along to the new archive, so
that only answers make a conversation pending.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from membot.durable import replace_atomic
from membot.ids import ConversationId
from membot.locks import KeyedLocks
from membot.memory.contract.delivery import DeliveryMark, progress
from membot.memory.files.archive import read_small, tail_of
from membot.memory.files.layout import MESSAGES, listing

log = logging.getLogger(__name__)

UNDELIVERED = "undelivered.json"
# The record's size: its JSON padded with spaces, so that every change is one write in place.
RECORD = 192

# messages.txt's (inode, size, mtime in ns); (0, 0, 0) when there is none. A record of the
# version before holds (inode, size): never equal to one now, so pending, with nothing after
# its mark to send when it said "nothing pending" (its mark is then the archive's last seq).
Archive = tuple[int, ...]
NONE: Archive = (0, 0, 0)
# The archive's last seq and what it was (`Archive`) after an append of this process.
End = tuple[int, Archive]


@dataclass(frozen=True, slots=True)
class Record:
    """A mark, and the archive it was written against (None: an earlier version's mark)."""

    mark: DeliveryMark
    archive: Archive | None

    def to_bytes(self) -> bytes:
        data: dict[str, Any] = json.loads(self.mark.to_json())
        if self.archive is not None:
            data["archive"] = list(self.archive)
        raw = json.dumps(data, separators=(",", ":")).encode()
        if len(raw) > RECORD - 1:
            raise ValueError("a delivery record longer than its fixed size")
        return raw.ljust(RECORD - 1) + b"\n"

    @classmethod
    def from_bytes(cls, raw: bytes) -> Record:
        """ValueError when it is not a record."""
        mark = DeliveryMark.from_json(raw)
        archive = json.loads(raw).get("archive")
        if archive is None:
            return cls(mark, None)
        try:
            found = tuple(int(n) for n in archive)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a delivery record ({exc})") from None
        return cls(mark, found)

    def pending(self, archive: Archive) -> DeliveryMark | None:
        """The mark while an answer may be unsent (the archive changed); None otherwise."""
        return None if self.archive == archive else self.mark


class _Unknown:
    """Not known: to be read from the file."""


UNKNOWN = _Unknown()
Known: TypeAlias = Record | _Unknown | None


def identity(st: os.stat_result) -> Archive:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def archive_of(directory: Path) -> Archive:
    try:
        return identity(os.stat(directory / MESSAGES))
    except FileNotFoundError:
        return NONE


def load(directory: Path) -> Record | None:
    """The record; None when there is none, or it cannot be read (logged; the next answer's
    append writes a new one)."""
    path = directory / UNDELIVERED
    for _ in range(2):  # once more: a read may meet a rewrite in progress, in a worker thread
        try:
            return Record.from_bytes(read_small(path))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            error = exc
    # Which answers it meant is lost: sending them all again could repeat a whole chat.
    log.warning("%s: unreadable %s (%s); its answers are not resent", directory, path.name, error)
    return None


def rewrite(directory: Path, record: Record) -> None:
    """The record changed in place: one write, not synced (see the module's docstring)."""
    fd = os.open(directory / UNDELIVERED, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.pwrite(fd, record.to_bytes(), 0)
    finally:
        os.close(fd)


def mark_pending(directory: Path, after: int, archive: Archive, known: Known = UNKNOWN) -> Record:
    """Before the append of an answer to send, on `archive` (as it is before the write):
    the conversation's first answer creates the record, synced; later ones need nothing,
    their own line makes the archive differ from the record (blocking). The record.
    `known`: the record as this process last read or wrote it, not read again."""
    record = load(directory) if isinstance(known, _Unknown) else known
    if record is None:  # none yet, or unreadable
        record = Record(DeliveryMark(after), archive)
        replace_atomic(directory / UNDELIVERED, record.to_bytes())
    return record


def follow(
    directory: Path, before: Archive, after: Archive, last: int, known: Known = UNKNOWN
) -> Record | None:
    """The archive went from `before` to `after` without an answer to send (its last seq now
    `last`): a record that said "nothing pending" says it of the new archive. Not synced: a
    power cut that loses it leaves a mark with nothing after it to send (blocking). The
    record. `known`: as for set_mark."""
    record = load(directory) if isinstance(known, _Unknown) else known
    if record is not None and record.archive == before:
        record = Record(DeliveryMark(max(record.mark.after, last)), after)
        rewrite(directory, record)
    return record


def read_mark(directory: Path) -> DeliveryMark | None:
    record = load(directory)
    return None if record is None else record.pending(archive_of(directory))


def set_mark(
    directory: Path,
    upto: int,
    parts: int | None,
    sending: bool,
    known: Known = UNKNOWN,
    end: End | None = None,
) -> Record | None:
    """Move the mark (see `progress`); the record as it is afterwards. `known`: the record
    as this process last read or wrote it, not read again; `end`: the archive's end as this
    process's last append left it, used while the archive is still that one."""
    record = load(directory) if isinstance(known, _Unknown) else known
    archive_now = archive_of(directory)
    mark = None if record is None else record.pending(archive_now)
    if record is None or mark is None:
        return record
    # The archive's end matters only to an answer done (is anything stored after it?): a
    # part's progress, recorded before each message is sent, does not read it.
    if parts is not None:
        last, archive = 0, record.archive
    elif end is not None and end[1] == archive_now:
        last, archive = end  # unchanged since this process's append: no read of its tail
    else:
        last, archive = _archive_end(directory)
    new = progress(mark, upto, parts, sending, last)
    # All delivered: nothing is pending on the archive as it is now.
    done = Record(DeliveryMark(last), archive) if new is None else Record(new, record.archive)
    rewrite(directory, done)
    return done


def read_record(directory: Path) -> tuple[Record | None, DeliveryMark | None]:
    record = load(directory)
    return record, None if record is None else record.pending(archive_of(directory))


def _archive_end(directory: Path) -> tuple[int, Archive]:
    """The archive's last seq and what it is (`Archive`), from one descriptor."""
    path = directory / MESSAGES
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0, NONE
    try:
        last, _, _ = tail_of(fd, 1, path)
        return (last[0].seq if last else 0), identity(os.fstat(fd))
    finally:
        os.close(fd)


def marked(root: Path, namespace: str) -> list[ConversationId]:
    return [c for c in listing(root, namespace) if read_mark(root / c.relative_path()) is not None]


class KnownRecords:
    """The records this process last read or wrote, by conversation (None: it has none),
    least recently used first out. The backend is the only writer of its DATA_DIR (as for
    its contexts, memory/files/hot.py), so a record it knows is not read again: the
    delivery of an answer asks for its chat's mark first (bot/outbox.py), and a worker
    thread's hop for it would cost tens of microseconds where the stat of the archive that
    says whether it is pending costs a few, in the event loop. Only that thread touches it.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._known: OrderedDict[ConversationId, tuple[Record | None, End | None]] = OrderedDict()

    def get(self, cid: ConversationId) -> Known:
        if cid not in self._known:
            return UNKNOWN
        self._known.move_to_end(cid)
        return self._known[cid][0]

    def end(self, cid: ConversationId) -> End | None:
        """The archive's end as this process's last append left it, if known: a delivery
        after it need not read the archive's tail while the archive is still that one."""
        known = self._known.get(cid)
        return None if known is None else known[1]

    def put(self, cid: ConversationId, record: Record | None, end: End | None = None) -> None:
        self._known[cid] = (record, end)
        self._known.move_to_end(cid)
        while len(self._known) > self.capacity:
            self._known.popitem(last=False)

    def drop(self, cid: ConversationId) -> None:
        self._known.pop(cid, None)


class _Files(Protocol):
    root: Path
    _lock: KeyedLocks
    _records: KnownRecords

    def conversation_dir(self, cid: ConversationId) -> Path: ...


class FileDeliveries:
    """The delivery methods of the contract, for FileRepository."""

    async def undelivered(self: _Files, namespace: str) -> list[ConversationId]:
        return await asyncio.to_thread(marked, self.root, namespace)

    async def delivery_mark(self: _Files, cid: ConversationId) -> DeliveryMark | None:
        async with self._lock(cid):  # not beside a rewrite of the record
            directory = self.conversation_dir(cid)
            known = self._records.get(cid)
            if not isinstance(known, _Unknown):
                # One stat in the event loop, not a thread's hop (see KnownRecords).
                return None if known is None else known.pending(archive_of(directory))
            record, mark = await asyncio.to_thread(read_record, directory)
            self._records.put(cid, record)
            return mark

    async def mark_delivered(
        self: _Files,
        cid: ConversationId,
        upto: int,
        parts: int | None = None,
        sending: bool = False,
    ) -> None:
        # Under the conversation's lock: an append between reading the archive's end and
        # recording it would be taken for delivered.
        async with self._lock(cid):
            directory = self.conversation_dir(cid)
            known, end = self._records.get(cid), self._records.end(cid)
            self._records.drop(cid)  # unknown, should the write fail
            record = await asyncio.to_thread(set_mark, directory, upto, parts, sending, known, end)
            self._records.put(cid, record, end)  # the archive is as it was: its end too
