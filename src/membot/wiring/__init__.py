"""Wiring for any front door: the model, the repository, the agent, the conversation service
and the background work, built once from the settings, closed once (`Core`). No aiogram here.

By concern: `model` (the provider's client, the agent), `storage` (the Redis client and its
health object, the repository, the turn locks), `media` (what the turn reads uploads with),
`core` (`Core` and `build_core`, which puts them together).

With STORAGE=redis this is where the process's one Redis client is made, and its one health
object (membot/redis/health.py: with QUEUE=local the circuit breaker, else the null object
that is always up); both are handed explicitly to every user of Redis and kept on `Core`
(`core.redis`, `core.health`) for the front doors' own users (Telegram's shared limits, the
stream, the API's sessions)."""

from membot.wiring.core import Core, build_core
from membot.wiring.media import MediaParts, build_media
from membot.wiring.model import LLM_RETRIES, build_agent, build_model, shutdown_grace
from membot.wiring.storage import build_redis, build_repository, build_turn_locks

__all__ = [
    "LLM_RETRIES",
    "Core",
    "MediaParts",
    "build_agent",
    "build_core",
    "build_media",
    "build_model",
    "build_redis",
    "build_repository",
    "build_turn_locks",
    "shutdown_grace",
]
