"""Redis, behind one boundary: the client factory (`client`), the translation of its errors
(`errors`), the health object, the breaker or the null one that is always up (`health`),
the turn locks across processes (`turnlock`) and the summary lease (`lease`).

Only this package and the Redis backends (memory, intake, usage) import redis-py (an
import-linter contract in pyproject.toml); everyone else sees `StorageUnavailable`.
Nothing is imported here, so using one part does not load the rest.
"""
