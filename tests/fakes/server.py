"""The part both fakes share: an aiohttp app on 127.0.0.1 that can stop and start again."""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Self

from aiohttp import web

log = logging.getLogger(__name__)


class LocalServer:
    """Subclasses build the app and may hook start and stop. A restart reuses the previous
    port, so a running bot reconnects to the same URL (outage tests: stop(), observe the bot's
    errors, start() again)."""

    def __init__(self) -> None:
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    def build_app(self) -> web.Application:
        raise NotImplementedError

    def _on_start(self) -> None:
        """Reset per-run state before the server accepts requests."""

    def _on_stop(self) -> None:
        """Release waiting handlers before the graceful shutdown waits on them."""

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError(f"{type(self).__name__} is already running")
        self._on_start()
        # handler_cancellation: when a client goes away (a timeout, a long poll abandoned),
        # its handler is cancelled, as the real server's work would be.
        runner = web.AppRunner(
            self.build_app(), access_log=None, handler_cancellation=True, shutdown_timeout=5.0
        )
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", self._port or 0).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = int(runner.addresses[0][1])
        log.debug("%s listening on port %d", type(self).__name__, self._port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._on_stop()
        await runner.cleanup()
        log.debug("%s stopped", type(self).__name__)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def origin(self) -> str:
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://127.0.0.1:{self._port}"
