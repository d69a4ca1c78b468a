"""A conversation's whole memory as a ZIP, for its user to take away (/export, the API's
GET /api/sessions/{id}/export): conversation.md, messages.jsonl, summary.md, facts.json,
tasks.json and files/. Transport-free: the front doors send what `Exports.build` makes.

The ZIP is written to files under DATA_DIR/.exports (0700, each 0600), never held in
memory, in parts of at most `part_size` bytes each a whole ZIP (Telegram takes a bot's
upload up to 50 MB); the files are removed when the `build` block ends. At most
`concurrency` exports are built at once per front door."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

from membot.clock import Clock, utc_now
from membot.export.build import Built, build
from membot.export.cut import Cut, take_cut
from membot.export.parts import PartedZip
from membot.ids import ConversationId
from membot.memory.contract.repository import ChatRepository
from membot.schedule.store import TaskStore

__all__ = ["Built", "Cut", "Exports", "part_names"]

log = logging.getLogger(__name__)

DIRECTORY = ".exports"
STALE = 24 * 3600.0  # seconds after which a file left in the directory is a crash's


def part_names(cut: Cut, count: int) -> list[str]:
    """What each part is called where it arrives: `membot-export-tg-123-2026-11-27.zip`, or
    `...-part1of3.zip` when there are several."""
    stem = f"membot-export-{cut.label}-{cut.taken:%Y-%m-%d}"
    if count == 1:
        return [f"{stem}.zip"]
    return [f"{stem}-part{n}of{count}.zip" for n in range(1, count + 1)]


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
    ) -> None:
        self.repository = repository
        self.task_store = task_store
        self.directory = data_dir / DIRECTORY
        self.default_zone = default_zone
        self.clock = clock
        self._slots = asyncio.Semaphore(concurrency)

    async def cut(self, cid: ConversationId) -> Cut:
        """What the export of `cid` holds, read now (see export/cut.py)."""
        return await take_cut(
            self.repository, self.task_store, cid, self.default_zone, clock=self.clock
        )

    @contextlib.asynccontextmanager
    async def build(self, cut: Cut, part_size: int | None) -> AsyncIterator[Built]:
        """The cut's export, in parts of at most `part_size` bytes (None: one ZIP); its
        files are removed when the block ends, however it ends."""
        async with self._slots:
            await asyncio.to_thread(_sweep, self.directory)
            t = cut.taken.astimezone(cut.zone)
            when = (t.year, t.month, t.day, t.hour, t.minute, t.second)
            out = await asyncio.to_thread(
                PartedZip, self.directory, part_size, stem=cut.label, when=when
            )
            started = time.perf_counter()
            built = await build(self.repository, cut, out)
        log.info(
            "%s: exported %d messages, %d files in %d part(s), %.1f s",
            cut.cid,
            built.messages,
            built.files,
            len(built.parts),
            time.perf_counter() - started,
        )
        try:
            yield built
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
