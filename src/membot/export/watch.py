"""What a /forget does to exports (core/forget.py calls `forgotten` once the repository has
forgotten): an export of that conversation being built or sent in this process is stopped
(`Stale`; the front door starts it again from what is left), and every file of that
conversation in DATA_DIR/.exports is deleted, whichever process left it (one killed in the
middle of a build, one building now). A build in another process sees it at its next part:
the conversation's generation is no longer the cut's (`Exports.check`).

The files of one conversation are named by its label (`tg-123-…`, `api-<uuid>-…`): the
parts, and the side files the build keeps beside them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import TypeVar

from membot.errors import Busy
from membot.ids import ConversationId

log = logging.getLogger(__name__)

DIRECTORY = ".exports"

_T = TypeVar("_T")


class Stale(Busy):
    """The conversation was forgotten from (or reset) while its export was built or sent:
    what was read may hold what is gone. Nothing of the export is left on disk; an export
    taken again (a new cut) has none of it."""


def label_of(cid: ConversationId) -> str:
    """The conversation as a file name has it: `tg-123`, `api-<uuid>`."""
    return f"{cid.namespace}-{cid.key}"


class ExportWatch:
    """This process's exports in progress, by conversation, and their directory."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / DIRECTORY
        self._stops: dict[ConversationId, set[asyncio.Event]] = {}

    @contextlib.contextmanager
    def watching(self, cid: ConversationId) -> Iterator[asyncio.Event]:
        """An event set when `cid` is forgotten from, for as long as the block runs."""
        stop = asyncio.Event()
        self._stops.setdefault(cid, set()).add(stop)
        try:
            yield stop
        finally:
            stops = self._stops.get(cid)
            if stops is not None:
                stops.discard(stop)
                if not stops:
                    del self._stops[cid]

    async def forgotten(self, cid: ConversationId) -> int:
        """Delete `cid`'s files in the directory, then stop its exports here; how many files.
        In that order: a stopped export is made again at once, and its new files must not be
        caught by the deletion (a build stopped after it removes its own files as it ends)."""
        removed = await asyncio.to_thread(_remove_named, self.directory, label_of(cid) + "-")
        for stop in self._stops.get(cid, ()):
            stop.set()
        if removed:
            log.info("%s: %d export file(s) deleted after a forget", cid, removed)
        return removed


async def unless_stopped(stop: asyncio.Event, work: Awaitable[_T]) -> _T:
    """`work`'s result, or Stale once `stop` is set first (`work` is then cancelled and
    awaited: it cleans up after itself before this returns)."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, waiter, return_exceptions=True)
    if task.cancelled():
        raise Stale("the conversation was forgotten from during its export")
    return task.result()


def _remove_named(directory: Path, prefix: str) -> int:
    removed = 0
    try:
        entries = list(directory.iterdir())
    except FileNotFoundError:
        return 0
    for path in entries:
        if path.name.startswith(prefix):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed += 1
    return removed
