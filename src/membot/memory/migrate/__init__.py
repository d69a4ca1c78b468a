"""`membot migrate`: copy every conversation between the files and the Redis backends."""

from membot.memory.migrate.run import Further, migrate, run_migrate
from membot.memory.migrate.sides import FilesSide, RedisSide

__all__ = ["FilesSide", "Further", "RedisSide", "migrate", "run_migrate"]
