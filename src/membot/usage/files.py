"""The usage ledger and the rate window of one process (STORAGE=files).

Charges are appended to `DATA_DIR/usage.jsonl`, one JSON line per model call, and summed in
memory, read back at the first use after a start. The sums change only on the event loop, so
within the process they are exact and atomic; several processes on one DATA_DIR would each
count alone, which is why the limits hold across processes only with Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections import defaultdict, deque
from datetime import datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path

import orjson

from membot.ids import ConversationId
from membot.memory.contract.models import iso, parse_iso
from membot.private import open_private, private_dir
from membot.usage.ledger import Charge, Kind, Row, Totals, day_key, month_key

log = logging.getLogger(__name__)

FILE_NAME = "usage.jsonl"


def charge_to_json(charge: Charge) -> str:
    data: dict[str, object] = {
        "ts": iso(charge.at),
        "purpose": charge.purpose,
        "model": charge.model,
        "prompt_tokens": charge.prompt_tokens,
        "completion_tokens": charge.completion_tokens,
        "cached_tokens": charge.cached_tokens,
    }
    if charge.cost is not None:
        data["cost"] = str(charge.cost)  # a string: exact, as the provider wrote it
    if charge.user_id is not None:
        data["user_id"] = charge.user_id
    if charge.conversation is not None:
        data["conversation"] = str(charge.conversation)
    if charge.estimated:  # only then: the lines written before it existed read as reported
        data["estimated"] = True
    return orjson.dumps(data).decode()  # compact, one line; a fifth of the stdlib's time


def charge_from_json(line: str) -> Charge:
    data = json.loads(line)
    cost = data.get("cost")
    conversation = data.get("conversation")
    return Charge(
        at=parse_iso(data["ts"]),
        purpose=str(data["purpose"]),
        model=str(data["model"]),
        prompt_tokens=int(data["prompt_tokens"]),
        completion_tokens=int(data["completion_tokens"]),
        cached_tokens=int(data.get("cached_tokens", 0)),
        cost=Decimal(cost) if cost is not None else None,
        user_id=int(data["user_id"]) if data.get("user_id") is not None else None,
        conversation=ConversationId.parse(conversation) if conversation else None,
        estimated=data.get("estimated") is True,
    )


# How long a charge waits for the next ones to share its write (one thread hop a batch).
# Charges are counted in memory at once; what waits is written by close(), or at once if the
# writer is cancelled (a shutdown that never reached close()), so it is lost only to a
# kill -9 or a power cut (an undercount; the answers themselves are durable).
WRITE_DELAY = 0.5


class FileLedger:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME
        # (kind, subject) -> period ("2026-11-25" or "2026-11") -> totals
        self._sums: dict[tuple[Kind, str], dict[str, Totals]] = defaultdict(dict)
        self._loaded = False
        self._loading = asyncio.Lock()
        # Lines not on disk yet, and the task writing them: one thread hop per batch, not
        # per model call (awaited by close()).
        self._pending: list[str] = []
        self._writer: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()

    async def _load(self) -> None:
        if self._loaded:
            return
        async with self._loading:
            if self._loaded:
                return
            for charge in await asyncio.to_thread(self._read):
                self._add(charge)
            self._loaded = True

    def _read(self) -> list[Charge]:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        charges = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                charges.append(charge_from_json(line))
            except (ValueError, KeyError, TypeError, InvalidOperation):
                log.warning("usage: skipped a torn or corrupt line %d of %s", number, self.path)
        return charges

    def _add(self, charge: Charge) -> None:
        periods = (day_key(charge.at), month_key(charge.at))
        for subject in charge.subjects():
            sums = self._sums[subject]
            for period in periods:
                sums.setdefault(period, Totals()).add(charge)

    async def record(self, charge: Charge) -> None:
        await self._load()
        self._add(charge)  # counted at once: the next check sees it, whatever the disk does
        self._pending.append(charge_to_json(charge) + "\n")
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name="membot:usage-writer")
            self._writer.add_done_callback(self._written)

    async def _write(self) -> None:
        while self._pending:
            if not self._closing.is_set():
                # Let the charges of the next moments share this write.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), WRITE_DELAY)
            batch, self._pending = self._pending, []
            await asyncio.to_thread(self._append_batch, batch)

    def _written(self, writer: asyncio.Task[None]) -> None:
        """The writer's end. Cancelled (the loop ending without close(), a second Ctrl-C),
        before its first step or in its wait: one small append in the loop's own thread
        rather than charges lost. A batch already handed to a thread is finished by it."""
        if writer.cancelled() and self._pending:
            batch, self._pending = self._pending, []
            self._append_batch(batch)

    def _append_batch(self, batch: list[str]) -> None:
        try:
            self._append("".join(batch))
        except OSError as exc:
            log.warning("usage: %d charge(s) not written to %s: %s", len(batch), self.path, exc)

    def _append(self, lines: str) -> None:
        private_dir(self.path.parent)
        # O_APPEND: each batch lands whole at the end, even with a second writer.
        fd = open_private(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, lines.encode())
        finally:
            os.close(fd)

    async def totals(self, kind: Kind, subject: str, period: str) -> Totals:
        await self._load()
        found = self._sums.get((kind, subject), {}).get(period)
        result = Totals()
        if found is not None:
            result.merge(found)
        return result

    async def report(self, since: str, until: str) -> list[Row]:
        await self._load()
        rows = []
        for (kind, subject), periods in sorted(self._sums.items()):
            total = Totals()
            for period, sums in periods.items():
                if len(period) == 10 and since <= period <= until:  # days only
                    total.merge(sums)
            if total.calls:
                rows.append(Row(kind, subject, total))
        return rows

    async def close(self) -> None:
        """Write what is still pending, now."""
        self._closing.set()
        if self._writer is not None:
            await self._writer


class LocalRateWindow:
    """A sliding 60-second window per user, in this process."""

    WINDOW = 60.0

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._hits: dict[int, deque[float]] = {}

    async def hit(self, user_id: int, now: datetime) -> float | None:
        """Count a message and return None, or return the seconds until one is allowed
        (then nothing is counted)."""
        t = now.timestamp()
        hits = self._hits.setdefault(user_id, deque())
        while hits and hits[0] <= t - self.WINDOW:
            hits.popleft()
        if len(hits) >= self.limit:
            return hits[0] + self.WINDOW - t
        hits.append(t)
        return None


__all__ = ["FileLedger", "LocalRateWindow", "charge_from_json", "charge_to_json"]
