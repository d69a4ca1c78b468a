"""`membot api`: the HTTP API alone (aiogram is never imported)."""

from __future__ import annotations

from collections.abc import Callable

from membot.config import Settings


async def serve_api(settings: Settings, before_serving: Callable[[], object]) -> None:
    """`membot api`: the HTTP API alone, until SIGINT or SIGTERM."""
    from membot.api.server import serve_forever

    await serve_forever(settings, before_serving=before_serving)
