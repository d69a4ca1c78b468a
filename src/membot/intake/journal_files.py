"""The journal's file work, in its worker thread: append durably, truncate, rewrite, read back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from membot.durable import ends_torn, fdatasync, fsync_dir, open_append, replace_atomic, write_all
from membot.private import private_dir

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class Worker:
    """One thread of the journal's own, running its file work in the order it was asked for:
    what is asked for later lands after it, so no caller needs to wait for what it does not
    use (an emptying)."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="membot-journal")
        self._last: Future[Any] | None = None  # the thread's, not the asker's (it may cancel)
        self._closed = False

    def run(self, fn: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
        work = self._pool.submit(fn, *args)
        self._last = work
        return asyncio.wrap_future(work)

    def empty(self, journal: JournalFile) -> None:
        """Truncate, not waited for: a failure is logged (the handled lines stay on disk, and
        each is checked against its chat's archive after a crash)."""
        self.run(journal.truncate).add_done_callback(_emptied)

    async def settled(self) -> None:
        """Once everything asked for so far is done (a failure is its asker's; an asker that
        was cancelled does not make this raise)."""
        if self._last is not None and not self._last.done():
            # In order: once this runs, all asked for before it has ended.
            await asyncio.get_running_loop().run_in_executor(self._pool, _nothing)

    def close(self, journal: JournalFile) -> None:
        """No more work: `journal`'s descriptor is closed after what was asked for before.
        Once: closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._pool.submit(journal.close)
        self._pool.shutdown(wait=False)


def _nothing() -> None:
    return None


def _emptied(work: asyncio.Future[None]) -> None:
    if not work.cancelled() and (exc := work.exception()) is not None:
        log.warning("journal: not emptied (%s)", exc)


class JournalFile:
    """The journal's file, in the journal's worker thread alone (Worker: one thread, its work
    in order). The descriptor appends go through stays open between them: an append is a
    stat (the path still names that file), its write and its fdatasync, not also an open, a
    check for a torn line, another stat and a close, each a system call after which a thread
    of Python waits for the interpreter while the event loop holds it (the journal's append
    took 0.7 ms of a worker's time a message, of which 0.14 ms its own). This process is the
    journal's only writer, so its size is known and its last line whole; a write that fails
    closes the descriptor, and the next append opens the file again and checks its end, as
    the first one does. A file deleted or moved aside by hand is made again, its directory
    entry synced, so no line goes where a restart would not read it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._file: tuple[int, int] = (0, 0)  # while open: its (device, inode)
        self._size = 0  # while open: the file's size, as this process wrote it

    def append(
        self,
        payload: bytes,
        sync_dir: bool = False,
        keep: Sequence[bytes] | None = None,
        compact_bytes: int = 0,
    ) -> int:
        """Append whole lines durably; the journal's size after it. `sync_dir` also makes the
        file's directory entry durable (the journal is truncated, never deleted: once is
        enough, but for a file made again here). With `keep`, the journal is then rewritten
        with these lines alone if it has reached `compact_bytes` (the append is durable first,
        whatever becomes of the rewrite)."""
        try:
            fd = self._open()
            if fd is None:  # opened now, or made again: its end checked, its entry synced
                fd = self._fd = open_append(self.path)
                st = os.fstat(fd)
                self._file, self._size = (st.st_dev, st.st_ino), st.st_size
                sync_dir = sync_dir or st.st_size == 0
                if ends_torn(fd, st.st_size):  # a crash tore the last line: end it first
                    payload = b"\n" + payload
            write_all(fd, payload)
            fdatasync(fd)
        except BaseException:
            self.close()  # what it wrote is unknown: opened and checked again next time
            raise
        self._size += len(payload)
        if sync_dir:
            fsync_dir(self.path.parent)
        if keep is not None and self._size >= compact_bytes:
            return self.rewrite(b"".join(line + b"\n" for line in keep))
        return self._size

    def _open(self) -> int | None:
        """The descriptor kept, if the path still names its file; else None (closed)."""
        if self._fd is None:
            return None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None
        if st is None or (st.st_dev, st.st_ino) != self._file:
            self.close()  # deleted or moved aside by hand: a line written there would be lost
            return None
        return self._fd

    def truncate(self) -> None:
        # No sync: after a power cut the old, handled lines may come back, and each is checked
        # against its chat's archive at start-up.
        try:
            os.truncate(self.path, 0)
        except FileNotFoundError:
            self.close()  # gone (by hand): the next append makes it again
        self._size = 0  # O_APPEND: the next write lands at the new end

    def rewrite(self, content: bytes) -> int:
        """Replace the journal atomically; its new size. With the directory's fsync: the
        updates still pending must not fall back to an older journal after a power cut."""
        self.close()  # the descriptor is the old file's
        private_dir(self.path.parent)
        replace_atomic(self.path, content, sync_dir=True)
        return len(content)

    def read(self) -> tuple[list[dict[str, Any]], set[int], int]:
        return read(self.path)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def read(path: Path) -> tuple[list[dict[str, Any]], set[int], int]:
    """The journal's readable updates, the ids marked done, and its size."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [], set(), 0
    records = []
    seen: set[int] = set()
    done: set[int] = set()
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if "done" in record:
                done.update(int(i) for i in record["done"])
            elif int(record["update_id"]) not in seen:  # a batch appended twice after an error
                seen.add(int(record["update_id"]))
                records.append(record)
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("journal: skipping a torn or corrupt line")
    return records, done, len(raw)
