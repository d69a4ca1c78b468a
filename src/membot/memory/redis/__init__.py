"""The Redis backend (`STORAGE=redis`): the repository, its keys and Lua scripts, and its
delivery marks. Imports redis-py: import it only where Redis is used."""

from membot.memory.redis.repository import RedisRepository

__all__ = ["RedisRepository"]
