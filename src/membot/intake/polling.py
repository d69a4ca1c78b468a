"""The polling source (TELEGRAM_MODE=polling): Telegram's updates into the intake.

Asking for the next batch (`getUpdates` with a higher offset) tells Telegram the previous one
was received, so a batch is asked for only once `put` says the last one is durable (in the
file journal, or in the Redis stream). While it cannot be kept (Redis unreachable, the disk
refusing) nothing more is fetched: the updates wait at Telegram and come once it can. With a
lease (QUEUE=redis) only one process polls at a time (shards.py `ReceiverLease`); any other
waits as a stand-in and takes over when the lease lapses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from membot.errors import StorageUnavailable
from membot.intake.contract import Intake, IntakeUnavailable, SourceConflict, SourceUnavailable
from membot.tasks import stopped

log = logging.getLogger(__name__)

# Longest wait after a failed poll or a failed put.
MAX_BACKOFF = 5.0


class Telegram(Protocol):
    """The Bot API calls a source makes (the front door's client, bot/updates.py). A poll
    raises SourceConflict or SourceUnavailable for what passes."""

    async def get_updates(
        self, offset: int | None, timeout: int, allowed_updates: Sequence[str]
    ) -> list[Mapping[str, Any]]: ...

    async def delete_webhook(self) -> None: ...

    async def set_webhook(self, url: str, secret: str, allowed_updates: Sequence[str]) -> None: ...


class Lease(Protocol):
    async def hold(self) -> bool: ...

    async def release(self) -> None: ...


class PollingSource:
    def __init__(
        self,
        telegram: Telegram,
        intake: Intake,
        *,
        allowed_updates: Sequence[str],
        poll_timeout: int,
        lease: Lease | None = None,
        standby: float = 1.0,
    ) -> None:
        self.telegram = telegram
        self.intake = intake
        self.lease = lease
        self.allowed_updates = list(allowed_updates)
        # With a lease, a poll waits at most a third of it, so it is renewed in time.
        self.poll_timeout = poll_timeout
        self.standby = standby
        self.received = 0
        self._offset: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._polling = False
        self._down = False

    async def start(self) -> None:
        # A webhook left registered would make every getUpdates fail.
        await self.telegram.delete_webhook()
        self._task = asyncio.create_task(self._run(), name="receiver")

    async def stop(self) -> None:
        """Stop polling. A poll in progress is cancelled: nothing it brought was confirmed,
        so Telegram sends it again to whoever polls next."""
        if self._task is not None:
            await stopped(self._task)
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.lease is not None:
            with contextlib.suppress(StorageUnavailable):
                await self.lease.release()

    async def _run(self) -> None:
        backoff = 0.0
        while True:
            if backoff:
                await asyncio.sleep(backoff)
            try:
                if self.lease is not None and not await self.lease.hold():
                    self._poller(False)
                    backoff = self.standby
                    continue
                self._intake(up=True)
                self._poller(True)
                updates = await self.telegram.get_updates(
                    self._offset, self.poll_timeout, self.allowed_updates
                )
                await self._put(updates)
                backoff = 0.0
            except (IntakeUnavailable, StorageUnavailable) as exc:
                self._intake(up=False, exc=exc)
                backoff = min(max(backoff * 2, 0.25), MAX_BACKOFF)
            except SourceConflict:
                log.warning("receiver: another process polls this bot (409 Conflict); waiting")
                backoff = MAX_BACKOFF
            except SourceUnavailable as exc:
                log.warning("receiver: polling failed (%s); retrying", exc)
                backoff = min(max(backoff * 2, 0.5), MAX_BACKOFF)
            except Exception as exc:  # as aiogram's own polling did: log, back off, poll again
                log.error("receiver: polling failed (%s); retrying", type(exc).__name__)
                backoff = min(max(backoff * 2, 1.0), MAX_BACKOFF)

    async def _put(self, updates: list[Mapping[str, Any]]) -> None:
        if not updates:
            return
        # A failure propagates: the offset stays, so the batch comes again (what was kept
        # already is recognised: the stream's mark, the journal's ids).
        await self.intake.put(updates)
        self._offset = int(updates[-1]["update_id"]) + 1
        self.received += len(updates)

    def _poller(self, active: bool) -> None:
        if active != self._polling:
            self._polling = active
            log.info(
                "receiver: %s", "polling Telegram" if active else "standing by (another polls)"
            )

    def _intake(self, *, up: bool, exc: BaseException | None = None) -> None:
        if up and self._down:
            self._down = False
            log.warning("receiver: updates can be kept again; polling again")
        elif not up and not self._down:
            self._down = True
            log.warning(
                "receiver: updates cannot be kept (%s): polling stops, updates wait at Telegram",
                exc,
            )
