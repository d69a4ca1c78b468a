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

from membot.durable import append_lines, replace_atomic
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

    def run(self, fn: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
        work = self._pool.submit(fn, *args)
        self._last = work
        return asyncio.wrap_future(work)

    def empty(self, path: Path) -> None:
        """Truncate, not waited for: a failure is logged (the handled lines stay on disk, and
        each is checked against its chat's archive after a crash)."""
        self.run(truncate, path).add_done_callback(_emptied)

    async def settled(self) -> None:
        """Once everything asked for so far is done (a failure is its asker's; an asker that
        was cancelled does not make this raise)."""
        if self._last is not None and not self._last.done():
            # In order: once this runs, all asked for before it has ended.
            await asyncio.get_running_loop().run_in_executor(self._pool, _nothing)

    def close(self) -> None:
        self._pool.shutdown(wait=False)


def _nothing() -> None:
    return None


def _emptied(work: asyncio.Future[None]) -> None:
    if not work.cancelled() and (exc := work.exception()) is not None:
        log.warning("journal: not emptied (%s)", exc)


def append(
    path: Path,
    payload: bytes,
    sync_dir: bool = False,
    keep: Sequence[bytes] | None = None,
    compact_bytes: int = 0,
) -> int:
    """Append whole lines durably; the journal's size after it. `sync_dir` also makes the
    file's directory entry durable (the journal is truncated, never deleted: once is enough).
    With `keep`, the journal is then rewritten with these lines alone if it has reached
    `compact_bytes` (the append is durable first, whatever becomes of the rewrite)."""
    size = append_lines(path, payload, sync_dir=sync_dir)
    if keep is not None and size >= compact_bytes:
        size = rewrite(path, b"".join(line + b"\n" for line in keep))
    return size


def truncate(path: Path) -> None:
    # No sync: after a power cut the old, handled lines may come back, and each is checked
    # against its chat's archive at start-up.
    with contextlib.suppress(FileNotFoundError):
        os.truncate(path, 0)


def rewrite(path: Path, content: bytes) -> int:
    """Replace the journal atomically; its new size. With the directory's fsync: the
    updates still pending must not fall back to an older journal after a power cut."""
    private_dir(path.parent)
    replace_atomic(path, content, sync_dir=True)
    return len(content)


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
