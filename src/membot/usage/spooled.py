"""Charges recorded while Redis is down (STORAGE=redis, QUEUE=local, the breaker open).

The bot keeps answering through an outage (memory/outage/repository.py), and what those answers cost
must not be lost: they are appended to `DATA_DIR/usage-spool.jsonl` and added to Redis at
the first charge recorded once Redis is back. Every call goes through the process's health
object (membot/redis/health.py): none waits on Redis while it is known to be down, and a failure
opens the breaker for everyone. The outage itself is reported once, by the health object;
nothing here warns again.
"""

from __future__ import annotations

import asyncio
import logging
import os
from functools import partial
from pathlib import Path

from membot.durable import open_append, replace_atomic, write_all
from membot.memory.contract.repository import StorageUnavailable
from membot.redis.health import RedisHealth
from membot.usage.files import charge_from_json, charge_to_json
from membot.usage.ledger import Charge, Kind, Row, Totals
from membot.usage.redis import RedisLedger

log = logging.getLogger(__name__)

SPOOL_NAME = "usage-spool.jsonl"


class SpooledLedger:
    def __init__(self, inner: RedisLedger, health: RedisHealth, data_dir: Path) -> None:
        self.inner = inner
        self.health = health
        self.spool = data_dir / SPOOL_NAME
        self._lock = asyncio.Lock()
        # Whether the spool may hold charges: unknown (None) until the first look, then
        # known without a stat per charge (only this process writes its DATA_DIR's spool).
        self._spooled: bool | None = None

    async def record(self, charge: Charge) -> None:
        try:
            await self.health.call(lambda: self.inner.record(charge))
        except StorageUnavailable:
            async with self._lock:
                await asyncio.to_thread(self._append, charge_to_json(charge) + "\n")
                self._spooled = True
            return
        await self._drain()

    def _append(self, line: str) -> None:
        fd = open_append(self.spool)
        try:
            write_all(fd, line.encode())
        finally:
            os.close(fd)

    async def _drain(self) -> None:
        if self._spooled is None:  # a spool left by an earlier run of this process
            self._spooled = await asyncio.to_thread(self.spool.exists)
        if not self._spooled:
            return
        async with self._lock:
            try:
                text = await asyncio.to_thread(self.spool.read_text, "utf-8")
            except FileNotFoundError:
                self._spooled = False
                return
            lines = [line for line in text.splitlines() if line.strip()]
            for number, line in enumerate(lines, 1):
                try:
                    charge = charge_from_json(line)
                except Exception:
                    log.warning("usage: skipped a torn or corrupt spooled line %d", number)
                    continue
                try:
                    await self.health.call(partial(self.inner.record, charge))
                except BaseException as exc:
                    # What is in Redis now leaves the spool: nothing is counted twice later.
                    # Replaced whole: a crash mid-rewrite leaves the old spool or this, never half.
                    rest = "".join(f"{x}\n" for x in lines[number - 1 :]).encode()
                    await asyncio.to_thread(replace_atomic, self.spool, rest)
                    if isinstance(exc, StorageUnavailable):
                        return  # the rest at the first charge once Redis is back again
                    raise
            await asyncio.to_thread(self.spool.unlink, missing_ok=True)
            self._spooled = False
            log.info("usage: %d charge(s) recorded during the outage added to Redis", len(lines))

    async def totals(self, kind: Kind, subject: str, period: str) -> Totals:
        # StorageUnavailable at once while Redis is down: the limits let the message through.
        return await self.health.call(lambda: self.inner.totals(kind, subject, period))

    async def report(self, since: str, until: str) -> list[Row]:
        return await self.inner.report(since, until)

    async def close(self) -> None:
        await self.inner.close()
