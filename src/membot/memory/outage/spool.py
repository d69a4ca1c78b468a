"""The outage spool: writes that could not reach Redis, kept in DATA_DIR until it is back.

One JSON object a line, appended and fdatasync'd (membot/durable.py) before the write is
reported done, so a spooled turn survives a kill of the bot. A change is a line
`{"id", "op", "cid", ...}`; once it has been written to Redis a line `{"done": id}` follows,
so a replay cut short by a crash resumes after the last change it finished. When every
change is done the file is emptied. A torn or unreadable line (a crash mid-write, an edit)
is skipped with a warning. The changes themselves are memory/outage/changes.py's;
memory/outage/repository.py decides when they are written, `Spool.turns` gives a conversation's
pending turns to read meanwhile.
"""

from __future__ import annotations

import asyncio
import fcntl
import itertools
import json
import logging
import os
from dataclasses import replace
from pathlib import Path

from membot.durable import append_lines, open_append, replace_atomic
from membot.ids import ConversationId, InvalidConversationId
from membot.memory.contract.models import Message
from membot.memory.outage.changes import Change

log = logging.getLogger(__name__)


class Spool:
    """The spool file and the changes in it not yet written (`pending`, oldest first).

    A process owns its spool file for its lifetime: an exclusive `flock` on it, taken at the
    first `load()`. When another live process holds DATA_DIR's `redis-spool.jsonl`, this one
    spools to `redis-spool-<pid>.jsonl` instead, so one's replay never empties the other's
    changes. At the first `load()`, the changes of any other spool file whose lock can be
    taken (its process is gone) are adopted: copied into this one's file, and theirs removed.
    """

    def __init__(self, path: Path) -> None:
        self.base = path
        self.path = path  # the file this process owns, once `load()` has taken it
        self.dead_path = path.with_name(f"{path.stem}.dead{path.suffix}")
        self.pending: list[Change] = []
        self._fd: int | None = None
        self._loaded = False
        self._lock = asyncio.Lock()  # file order is the order changes were spooled

    async def load(self) -> None:
        """Take the spool file and read what a previous run left (once)."""
        if self._loaded:  # every repository call asks: no lock once it is done
            return
        async with self._lock:
            if not self._loaded:
                self.pending = await asyncio.to_thread(self._claim)
                self._loaded = True
                if self.pending:
                    log.info("%d change(s) spooled while Redis was down", len(self.pending))

    def _claim(self) -> list[Change]:
        pid = os.getpid()
        stem, suffix = self.base.stem, self.base.suffix
        names = itertools.chain(
            [self.base.name, f"{stem}-{pid}{suffix}"],
            (f"{stem}-{pid}-{n}{suffix}" for n in itertools.count(2)),
        )
        for name in names:
            path = self.base.with_name(name)
            fd = _try_lock(path)
            if fd is not None:
                self.path, self._fd = path, fd
                break
        if self.path != self.base:
            log.warning(
                "%s is in use by another process: spooling to %s", self.base.name, self.path.name
            )
        pending = read_pending(self.path)
        for other in sorted(self.base.parent.glob(f"{self.base.stem}*{self.base.suffix}")):
            if other == self.path or other == self.dead_path or not _spool_name(self, other):
                continue
            fd = _try_lock(other)
            if fd is None:
                continue  # its process is alive: its changes are its own
            try:
                left = read_pending(other)
                if left:
                    payload = b"".join(c.to_line() for c in left)
                    append_lines(self.path, payload, sync_dir=True)
                    pending.extend(left)
                    log.info("%d change(s) adopted from %s", len(left), other.name)
                if other != self.base:
                    other.unlink(missing_ok=True)
                else:
                    os.ftruncate(fd, 0)
                    os.fsync(fd)
            finally:
                os.close(fd)
        return pending

    async def add(self, change: Change) -> None:
        """Keep a change durably; it is pending once this returns."""
        await self.load()
        async with self._lock:
            await asyncio.to_thread(append_lines, self.path, change.to_line(), sync_dir=True)
            self.pending.append(change)

    async def done(self, change: Change) -> None:
        """Mark the oldest change written; empty the file once nothing is pending."""
        async with self._lock:
            assert self.pending and self.pending[0] is change, "changes are done in order"
            self.pending.pop(0)
            if self.pending:
                line = (json.dumps({"done": change.id}) + "\n").encode()
                await asyncio.to_thread(append_lines, self.path, line)
            else:
                await asyncio.to_thread(self._empty)

    async def dead(self, change: Change) -> None:
        """Set aside the oldest change, which the server refuses: kept in the dead-letter
        file (`redis-spool.dead.jsonl`) for a person to look at, and done here."""
        await asyncio.to_thread(append_lines, self.dead_path, change.to_line(), sync_dir=True)
        await self.done(change)

    def turns(self, cid: ConversationId, limit: int) -> list[Message]:
        """The conversation's turns still pending, oldest first, the last `limit` (what came
        before a pending reset is gone); seqs are provisional. Read-your-writes while the
        server is down: the journal's "was this answered?" sees them."""
        messages: list[Message] = []
        for change in self.pending:
            if change.cid != cid:
                continue
            if change.op == "reset":
                messages = []
            elif change.op == "append":
                messages.extend(change.messages())
        kept = messages[-limit:] if limit > 0 else []
        return [replace(m, seq=i) for i, m in enumerate(kept, 1)]

    def _empty(self) -> None:
        if self._fd is None:  # not owned (cannot happen after load): replace it whole
            replace_atomic(self.path, b"")
            return
        # In place, not by a rename: the lock is on this file.
        os.ftruncate(self._fd, 0)
        os.fsync(self._fd)

    def close(self) -> None:
        """Give the file up (the process's end); an empty per-process file is removed."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if self.path != self.base and not self.pending and os.fstat(fd).st_size == 0:
                self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)
        self._loaded = False
        self.path = self.base


def _spool_name(spool: Spool, path: Path) -> bool:
    """Whether `path` is a spool file of DATA_DIR (the shared one or a process's own)."""
    if path == spool.base:
        return True
    middle = path.name.removeprefix(f"{spool.base.stem}-").removesuffix(spool.base.suffix)
    return middle.replace("-", "").isdigit() and path.name.startswith(f"{spool.base.stem}-")


def _try_lock(path: Path) -> int | None:
    """An exclusive lock on `path` (created when missing), or None when another open file
    holds it (another process, or another Spool of this one)."""
    fd = open_append(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def read_pending(path: Path) -> list[Change]:
    """The changes of a spool file not marked done, in file order."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    changes: dict[str, Change] = {}
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("not an object")
            if "done" in record:
                changes.pop(str(record["done"]), None)
                continue
            change = Change.from_record(record)
        except (ValueError, KeyError, TypeError, InvalidConversationId) as exc:
            log.warning("%s: skipping unreadable line %d (%s)", path.name, number, exc)
            continue
        changes[change.id] = change
    return list(changes.values())
