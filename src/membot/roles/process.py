"""A process, whatever its role (`membot api` too): its parts started in order, run until
told to stop, shut down in order, released."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from membot.config import Settings
from membot.roles import ProcessRole
from membot.roles.factory import Parts, build_parts
from membot.roles.signals import Stopping, on_signals
from membot.wiring import Core, shutdown_grace

if TYPE_CHECKING:
    from membot.bot.drafts import DraftPacing

log = logging.getLogger(__name__)


class Process:
    """One process's parts: `run()` until `stop()` or a signal."""

    def __init__(
        self,
        settings: Settings,
        role: ProcessRole = "run",
        core: Core | None = None,
        drafts: DraftPacing | None = None,  # the drafts' pacing; None: Telegram's
    ) -> None:
        self.parts: Parts = build_parts(settings, role, core, drafts)
        self.settings = settings
        self.role = role
        self.core = self.parts.core
        self.app = self.parts.app
        self.source = self.parts.source
        self.runner = self.parts.runner
        self.stopping = Stopping()
        self.redelivery = self.parts.redelivery
        self._intake_open = True

    async def run(self, *, handle_signals: bool = True) -> None:
        """Start, serve until told to stop, shut down. The signals are heard from the start
        to the end of the shutdown: a second one hurries the shutdown, never interrupts it."""
        with on_signals(self.stopping) if handle_signals else contextlib.nullcontext():
            if not await self._started():
                return
            try:
                await self.stopping.requested.wait()
            finally:
                await self.shutdown()

    async def _started(self) -> bool:
        """Start, unless told to stop first: a stop during start-up (a Bot API or a Redis
        slow to answer) cuts it short, everything started released. False then."""
        starting = asyncio.ensure_future(self.start())
        told = asyncio.ensure_future(self.stopping.requested.wait())
        try:
            await asyncio.wait({starting, told}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            told.cancel()
        if starting.done():
            starting.result()  # a failed start-up raises here
            return True
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        log.warning("membot %s: start-up cut short by a stop", self.role)
        return False

    async def stop(self) -> None:
        self.stopping.stop()

    async def start(self) -> None:
        p = self.parts
        running = False
        try:
            await p.core.start()
            if p.app is not None and p.source is not None:
                await p.app.set_commands()
            if p.intake is not None:
                await p.intake.start()  # the stream's shard count checked; a journal's replay
            if p.runner is not None:
                await p.runner.start()
                running = True
            if p.source is not None:
                await p.source.start()
            if p.due is not None:
                await p.due.start()
            if p.api is not None:
                await p.api.start()  # a port already taken fails the start-up cleanly
            await p.core.serving()  # which models see images: once the checks have passed
            if self.redelivery is not None:
                self.redelivery.start()
        except BaseException:
            if running and p.runner is not None:  # replayed turns in flight: left pending
                await p.runner.stop(0.0, self.stopping.hurried)
            await self._release()
            raise
        self._log_started()

    def _log_started(self) -> None:
        settings = self.settings
        if self.role == "api" and self.parts.api is not None:  # the HTTP API alone
            log.info(
                "membot api started on %s: model=%s data_dir=%s",
                self.parts.api.url,
                settings.llm.default_model,
                settings.storage.data_dir,
            )
            return
        if not settings.limits.allowed_user_ids:
            log.warning("ALLOWED_USER_IDS is empty: the bot answers everyone")
        log.info(
            "membot %s started: queue=%s telegram=%s model=%s data_dir=%s window=%d "
            "summary_every=%d tools=%s mode=%s",
            self.role,
            settings.queue.backend,
            settings.telegram.mode,
            settings.llm.default_model,
            settings.storage.data_dir,
            settings.conversation.window_size,
            settings.conversation.summary_every,
            ",".join(settings.tools.enabled) or "none",
            settings.tools.mode,
        )

    async def shutdown(self) -> None:
        """Receiving stops first; the API takes no new requests either. Updates and requests
        already being answered finish, then the summaries; everything is released."""
        p = self.parts
        grace = shutdown_grace(self.settings.llm)
        hurry = self.stopping.hurried
        try:
            if self.redelivery is not None:
                await self.redelivery.stop()  # what it had not sent is sent at the next start
            if p.source is not None:
                await p.source.stop()
            if p.due is not None:
                await p.due.stop()
            if p.api is not None:
                await p.api.stop_accepting()
            if p.runner is not None:
                await p.runner.stop(grace, hurry)
            # The stream's shards go to the other workers at once, the journal's done marks
            # to the disk; then the API's requests finish (the only wait for the turns in
            # flight: Core.aclose does not wait again), then the summaries, in _release.
            await self._close_intake()
            await p.core.service.wait_idle(grace, hurry)
        finally:
            await self._release()
        log.info("membot %s stopped", self.role)

    async def _release(self) -> None:
        p = self.parts
        try:
            if self.redelivery is not None:
                await self.redelivery.stop()
            if p.source is not None:
                await p.source.stop()
            if p.due is not None:
                await p.due.stop()
            await self._close_intake()  # the stream's client is the core's, closed with it
            if p.api is not None:
                # Hurried: the requests still in progress are cut short; their clients may
                # send them again (a round cut short stored nothing, or was stored whole).
                await p.api.close(hurry=self.stopping.hurried.is_set())
            await p.core.aclose(self.stopping.hurried)
        finally:
            if p.app is not None:
                await p.app.close()

    async def _close_intake(self) -> None:
        intake = self.parts.intake
        if intake is not None and self._intake_open:
            self._intake_open = False
            await intake.stop()
            await intake.close()
