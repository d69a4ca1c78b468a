"""A conversation's whole memory as a ZIP, for its user to take away (/export, the API's
GET /api/sessions/{id}/export): conversation.md, messages.jsonl, summary.md, facts.json,
tasks.json and files/. Transport-free: the front doors send what `Exports.build` makes.

The ZIP is written to files under DATA_DIR/.exports (0700, each 0600), never held in
memory, in parts of at most `part_size` bytes each a whole ZIP (Telegram takes a bot's
upload up to 50 MB); the files are removed when the `build` block ends. At most
`concurrency` exports are built at once per front door. A /forget of the conversation
while its export is built or sent stops it (`Stale`, export/watch.py): the front door takes
a new cut and builds again, so no export sends what was forgotten."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from membot.clock import Clock, utc_now
from membot.export.build import Built, build
from membot.export.cut import Cut, take_cut
from membot.export.parts import PartedZip
from membot.export.watch import DIRECTORY, ExportWatch, Stale, unless_stopped
from membot.ids import ConversationId
from membot.memory.contract.repository import ChatRepository
from membot.schedule.store import TaskStore

__all__ = ["Built", "Cut", "Export", "ExportWatch", "Exports", "Stale", "part_names"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
STALE = 24 * 3600.0  # seconds after which a file left in the directory is a crash's


def part_names(cut: Cut, count: int) -> list[str]:
    """What each part is called where it arrives: `membot-export-tg-123-2026-11-27.zip`, or
    `...-part1of3.zip` when there are several."""
    stem = f"membot-export-{cut.label}-{cut.taken:%Y-%m-%d}"
    if count == 1:
        return [f"{stem}.zip"]
    return [f"{stem}-part{n}of{count}.zip" for n in range(1, count + 1)]


class Export:
    """A built export, while its `build` block runs: its parts, and how to send them."""

    def __init__(
        self, built: Built, cut: Cut, stop: asyncio.Event, repository: ChatRepository
    ) -> None:
        self.built, self.cut, self.stop = built, cut, stop
        self.repository = repository

    @property
    def parts(self) -> list[Path]:
        return self.built.parts

    @property
    def messages(self) -> int:
        return self.built.messages

    @property
    def files(self) -> int:
        return self.built.files

    @property
    def missing_files(self) -> int:
        return self.built.missing_files

    async def current(self) -> None:
        """Stale when the conversation was forgotten from since the cut: here (the watch),
        or in another process (a new generation)."""
        if self.stop.is_set():
            raise Stale("the conversation was forgotten from during its export")
        meta = await self.repository.get_meta(self.cut.cid)
        if meta.generation != self.cut.generation:
            raise Stale("the conversation was forgotten from during its export")

    async def send(self, work: Callable[[], Awaitable[_T]]) -> _T:
        """`work()` (sending a part) once the cut is still current; Stale instead, or when
        the conversation is forgotten from while it runs (it is then cancelled)."""
        await self.current()
        return await unless_stopped(self.stop, work())


class Exports:
    def __init__(
        self,
        repository: ChatRepository,
        task_store: TaskStore | None,
        data_dir: Path,
        *,
        default_zone: str = "UTC",
        clock: Clock = utc_now,
        concurrency: int = 2,
        watch: ExportWatch | None = None,
    ) -> None:
        self.repository = repository
        self.task_store = task_store
        self.directory = data_dir / DIRECTORY
        # The process's one watch (wiring builds it; /forget tells it), else one of its own.
        self.watch = watch if watch is not None else ExportWatch(data_dir)
        self.default_zone = default_zone
        self.clock = clock
        self._slots = asyncio.Semaphore(concurrency)

    async def cut(self, cid: ConversationId) -> Cut:
        """What the export of `cid` holds, read now (see export/cut.py)."""
        return await take_cut(
            self.repository, self.task_store, cid, self.default_zone, clock=self.clock
        )

    @contextlib.asynccontextmanager
    async def build(self, cut: Cut, part_size: int | None) -> AsyncIterator[Export]:
        """The cut's export, in parts of at most `part_size` bytes (None: one ZIP); its
        files are removed when the block ends, however it ends. Stale when the conversation
        is forgotten from before it is built (nothing is left of it then)."""
        with self.watch.watching(cut.cid) as stop:
            async with self._slots:
                await asyncio.to_thread(_sweep, self.directory)
                t = cut.taken.astimezone(cut.zone)
                when = (t.year, t.month, t.day, t.hour, t.minute, t.second)
                out = await asyncio.to_thread(
                    PartedZip, self.directory, part_size, stem=cut.label, when=when
                )
                started = time.perf_counter()
                built = await unless_stopped(stop, build(self.repository, cut, out))
            log.info(
                "%s: exported %d messages, %d files in %d part(s), %.1f s",
                cut.cid,
                built.messages,
                built.files,
                len(built.parts),
                time.perf_counter() - started,
            )
            try:
                yield Export(built, cut, stop, self.repository)
            finally:
                await asyncio.shield(asyncio.to_thread(_remove, built.parts))


def _remove(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _sweep(directory: Path) -> None:
    """Files an export left behind when its process died (any process's, older than a day)."""
    now = time.time()
    try:
        entries = list(directory.iterdir())
    except FileNotFoundError:
        return
    for path in entries:
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > STALE:
                path.unlink()
