"""`membot migrate`: copy every conversation between the files and the Redis backends."""

from membot.memory.migrate.run import FilesSide, RedisSide, migrate, run_migrate

__all__ = ["FilesSide", "RedisSide", "migrate", "run_migrate"]
