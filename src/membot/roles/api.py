"""`membot api`: the HTTP API alone (aiogram is never imported)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from membot.api.server import ApiServer
from membot.config import Settings
from membot.roles.signals import Stopping, on_signals
from membot.wiring import build_core, shutdown_grace

log = logging.getLogger(__name__)


async def serve_api(settings: Settings, before_serving: Callable[[], object] | None = None) -> None:
    """Serve the API alone until SIGINT or SIGTERM, then shut down gracefully: stop taking
    requests, let those in progress finish (a second signal cuts them short), release
    everything. `before_serving` runs once
    everything is built and started, before the port takes requests."""
    core = build_core(settings)
    server = ApiServer(settings, core)
    stopping = Stopping()
    with on_signals(stopping):  # from the start to the end of the shutdown
        try:
            await core.start()
            if before_serving is not None:
                before_serving()
            await server.start()
            await core.serving()
            log.info(
                "membot api started on %s: model=%s data_dir=%s",
                server.url,
                settings.llm.default_model,
                settings.storage.data_dir,
            )
            await stopping.requested.wait()
            log.info("membot api stopping")
            await server.stop_accepting()
            await core.service.wait_idle(shutdown_grace(settings.llm), stopping.hurried)
        finally:
            # Hurried: the requests still in progress are cut short; their clients may send
            # them again (a round cut short stored nothing, or was stored whole).
            await server.close(hurry=stopping.hurried.is_set())
            await core.aclose(stopping.hurried)
    log.info("membot api stopped")
