"""Serving an aiohttp application: the HTTP API and the webhook receiver start the same way."""

from __future__ import annotations

from aiohttp import web


async def listen(
    app: web.Application,
    host: str,
    port: int,
    *,
    shutdown_timeout: float,
    handler_cancellation: bool = False,
) -> web.AppRunner:
    """Serve `app` on host:port and return the runner to clean up; nothing is left open when
    it fails (a port already taken, say). A request in progress at cleanup gets
    `shutdown_timeout` seconds to finish. `handler_cancellation`: a request's handler is
    cancelled as soon as its client disconnects (aiohttp's "web handler cancellation"),
    rather than finding out at its next read or write."""
    runner = web.AppRunner(
        app,
        access_log=None,
        shutdown_timeout=shutdown_timeout,
        handler_cancellation=handler_cancellation,
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner
