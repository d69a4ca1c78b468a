"""What Redis keeps under a test's key prefix, as text: what the tests that look for words
left behind (after /forget) search, whatever the key's type."""

from __future__ import annotations

import json

from redis.asyncio import Redis


async def stored_values(client: Redis, prefix: str) -> list[str]:
    """Every value under `prefix` as text: a string, the members of a sorted set, list or set,
    a hash's `field=value`s, a stream's entries as JSON. The client decodes replies as text,
    as membot's does."""
    found: list[str] = []
    async for key in client.scan_iter(match=f"{prefix}*"):
        kind = await client.type(key)
        if kind == "string":
            found.append(str(await client.get(key)))
        elif kind == "zset":
            found += await client.zrange(key, 0, -1)
        elif kind == "list":
            found += await client.lrange(key, 0, -1)
        elif kind == "hash":
            found += [f"{k}={v}" for k, v in (await client.hgetall(key)).items()]
        elif kind == "set":
            found += await client.smembers(key)
        elif kind == "stream":
            found += [json.dumps(e) for e in await client.xrange(key)]
    return found
