"""Which worker reads which shard: leases in Redis, handed out by rendezvous hashing.

Every worker keeps a heartbeat in `{REDIS_PREFIX}q:workers` (a sorted set scored by Redis's
own clock, so the processes' clocks do not matter). The live workers are those heard from
within `CLAIM_IDLE` seconds; every worker computes the same assignment from that list
(highest random weight: a shard goes to the worker whose hash with it is highest, so a worker
joining or leaving moves only its share) and holds a lease, `{REDIS_PREFIX}q:lease:<n>`, on
each shard it reads. A lease lives `CLAIM_IDLE` seconds and is renewed every third of that.

A worker gives a shard up only once the updates it holds from it are done, so the next
holder starts after them; a worker that dies stops renewing, and its shards are taken over
when their leases expire, `CLAIM_IDLE` seconds later at most.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from membot.redis.errors import unavailable

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

log = logging.getLogger(__name__)

_HEARTBEAT = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if ARGV[1] ~= '' then redis.call('ZADD', KEYS[1], ms, ARGV[1]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms - 10 * tonumber(ARGV[2]))
return redis.call('ZRANGEBYSCORE', KEYS[1], ms - tonumber(ARGV[2]), '+inf')
"""

# Take the lease if free, renew it if ours: 1 if held now, 0 if another worker holds it.
_HOLD = """
local owner = redis.call('GET', KEYS[1])
if owner == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if owner == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def assign(shards: int, workers: Iterable[str]) -> dict[int, str]:
    """Rendezvous hashing: each shard to the worker with the highest hash of (shard, worker)."""
    names = sorted(set(workers))
    if not names:
        return {}
    return {s: max(names, key=lambda w: _weight(s, w)) for s in range(shards)}


def _weight(shard: int, worker: str) -> bytes:
    return hashlib.blake2b(f"{shard}:{worker}".encode(), digest_size=8).digest()


class ShardLeases:
    """The heartbeat and the leases of one worker (`consumer`)."""

    def __init__(self, client: Redis, prefix: str, consumer: str, *, ttl: float) -> None:
        self.client = client
        self.prefix = prefix
        self.consumer = consumer
        self.ttl_ms = max(int(ttl * 1000), 100)
        self._heartbeat: AsyncScript = client.register_script(_HEARTBEAT)
        self._hold: AsyncScript = client.register_script(_HOLD)
        self._release: AsyncScript = client.register_script(_RELEASE)

    def lease_key(self, shard: int) -> str:
        return f"{self.prefix}q:lease:{shard}"

    async def live_workers(self, *, present: bool = True) -> list[str]:
        """Beat (unless leaving) and return the workers heard from within the lease time."""
        me = self.consumer if present else ""
        live = await self._heartbeat(keys=[f"{self.prefix}q:workers"], args=[me, self.ttl_ms])
        return [str(w) for w in live]

    async def leave(self) -> None:
        await self.client.zrem(f"{self.prefix}q:workers", self.consumer)

    async def hold(self, shard: int) -> bool:
        return bool(
            await self._hold(keys=[self.lease_key(shard)], args=[self.consumer, self.ttl_ms])
        )

    async def release(self, shard: int) -> None:
        await self._release(keys=[self.lease_key(shard)], args=[self.consumer])


class ReceiverLease:
    """Only one receiver polls Telegram at a time (a second poller gets 409 Conflict): the
    others wait as stand-ins and take over within `ttl` seconds when it stops. `name`: what
    the lease is for; the clock that fires due tasks (intake/due.py) holds one of its own."""

    def __init__(
        self, client: Redis, prefix: str, owner: str, *, ttl: float, name: str = "receiver"
    ) -> None:
        self.key = f"{prefix}q:{name}"
        self.name = name
        self.owner = owner
        self.ttl_ms = max(int(ttl * 1000), 100)
        self._hold: AsyncScript = client.register_script(_HOLD)
        self._release: AsyncScript = client.register_script(_RELEASE)

    async def hold(self) -> bool:
        """Whether this receiver polls now. StorageUnavailable when Redis failed."""
        with unavailable(f"{self.name} lease"):
            return bool(await self._hold(keys=[self.key], args=[self.owner, self.ttl_ms]))

    async def release(self) -> None:
        with unavailable(f"{self.name} lease"):
            await self._release(keys=[self.key], args=[self.owner])
