"""The stream (QUEUE=redis): the intake in Redis Streams, what the receiver adds and workers take.

Updates are spread over `QUEUE_SHARDS` streams by chat, `{REDIS_PREFIX}q:s:<n>`, each read
through one consumer group, `workers`. A shard is read by one worker at a time (intake/shards.py
hands them out), so a chat's updates reach one worker, in the order they were added.

Each update also leaves a mark, `{REDIS_PREFIX}q:u:<update_id>`, for a day (as long as Telegram
keeps an update): "q" once queued, "d" once handled. The receiver adds an update only if it
has no mark, in the same script, so Telegram's redelivery of an update already queued (a
webhook answer that got lost, a poll repeated after a receiver crash) is not queued twice.
A due task's firing is queued again once handled (the clock puts it again only while its
task is still due at that time), never twice at once.
A worker acknowledges an entry, marks it handled and deletes it in one script: the streams
hold only updates still waiting or in hand.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from redis.exceptions import ResponseError

from membot.config import ConfigError
from membot.intake.contract import Entry, chat_of
from membot.redis.errors import unavailable
from membot.schedule.models import TASK_UPDATE

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

log = logging.getLogger(__name__)

GROUP = "workers"
# An update's mark once it is handled (it is "q" while queued).
HANDLED = "d"
# How long an update's mark is kept: Telegram keeps an undelivered update for 24 hours.
MARK_TTL_MS = 86_400_000

# ARGV[5] '1': a due task's firing (intake/due.py), refused only while it is queued. The clock
# puts one again only while its task is still at that time (its turn failed for good and was
# acknowledged); its turn checks the task and the archive itself (core/timed.py).
_PUBLISH = """
local mark = redis.call('GET', KEYS[1])
if mark and not (ARGV[5] == '1' and mark == 'd') then return 0 end
redis.call('SET', KEYS[1], 'q', 'PX', ARGV[1])
redis.call('XADD', KEYS[2], '*', 'u', ARGV[2], 'c', ARGV[3], 'd', ARGV[4])
return 1
"""

_ACK = """
redis.call('SET', KEYS[2], 'd', 'PX', ARGV[3])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
"""


# Read only from shards whose lease this worker holds, in one step (a fenced read): a worker
# that lost a shard, and does not know it yet, can take nothing more from it, so every entry
# of a shard is either in its holder's hands or claimed by the next holder when it takes over.
#
# A read takes its entries into the consumer's pending list whether or not the reply arrives.
# When it does not (Redis killed or cut off after running the script, or a read that timed
# out), the client sends the same read again, or the worker does after an error: without care
# the lost entries would sit unseen in that list, their chats answered on without them. So
# each read carries a token, kept by the worker until a read succeeds, and a read that takes
# entries leaves its token in the consumer's read key: the same token again means the reply
# was lost, and the read then also returns every entry still pending for this consumer (the
# worker skips those it has in hand). A read that takes nothing writes nothing (an idle
# worker reads every second). `sweep` asks for the pending entries in any case: the worker
# does so now and then, for what a token cannot catch (a stalled Redis that ran a retry
# before the read it repeats).
#
# KEYS: n lease keys, then the n streams, then the consumer's read key. ARGV: the worker, the
# group, the consumer, the most new entries to take, the read's token, the read key's life in
# ms, "1" to sweep. Returns, per shard held: {index, the stream's last entry id, entries,
# pending entries}.
_READ_HELD = """
local n = (#KEYS - 1) / 2
local budget = tonumber(ARGV[4])
local again = ARGV[7] == '1' or redis.call('GET', KEYS[#KEYS]) == ARGV[5]
local took = false
local out = {}
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    local entries = {}
    local pending = {}
    if again then
      local got = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[3], 'STREAMS', KEYS[n + i], '0')
      if got then pending = got[1][2] end
    end
    if budget > 0 then
      local got = redis.call(
        'XREADGROUP', 'GROUP', ARGV[2], ARGV[3], 'COUNT', budget, 'STREAMS', KEYS[n + i], '>')
      if got then
        entries = got[1][2]
        budget = budget - #entries
        took = took or #entries > 0
      end
    end
    local last = redis.call('XREVRANGE', KEYS[n + i], '+', '-', 'COUNT', 1)
    local last_id = '0-0'
    if #last > 0 then last_id = last[1][1] end
    table.insert(out, {i - 1, last_id, entries, pending})
  end
end
if took then redis.call('SET', KEYS[#KEYS], ARGV[5], 'PX', ARGV[6]) end
return out
"""
# How long the script remembers a consumer's last read token (a read is retried within
# seconds; the worker reads at least every BLOCK_MS).
READ_TOKEN_MS = 600_000


class QueueMismatch(ConfigError):
    """The stream in Redis was made with another shard count than this process's settings."""


class UpdateStream:
    """The streams, their group and the marks, on one Redis client."""

    def __init__(self, client: Redis, prefix: str, shards: int) -> None:
        self.client = client
        self.prefix = prefix
        self.shards = shards
        self._publish: AsyncScript = client.register_script(_PUBLISH)
        self._ack: AsyncScript = client.register_script(_ACK)
        self._read_held: AsyncScript = client.register_script(_READ_HELD)

    def key(self, shard: int) -> str:
        return f"{self.prefix}q:s:{shard}"

    def mark_key(self, update_id: int) -> str:
        return f"{self.prefix}q:u:{update_id}"

    def shard_of(self, chat: str, update_id: int) -> int:
        if not chat:
            return update_id % self.shards
        return zlib.crc32(chat.encode()) % self.shards

    async def prepare(self) -> None:
        """Record the shard count (the first process to come decides it), check ours against
        it, and make sure every shard's group exists (re-made after Redis lost its data)."""
        key = f"{self.prefix}q:shards"
        await self.client.set(key, self.shards, nx=True)
        stored = int(await self.client.get(key) or self.shards)
        if stored != self.shards:
            raise QueueMismatch(
                f"QUEUE_SHARDS is invalid: the stream in Redis has {stored} shards, this "
                f"process is set to {self.shards} (every process must use the same)"
            )
        for shard in range(self.shards):
            await self.ensure_group(shard)

    async def ensure_group(self, shard: int) -> None:
        try:
            # From the start of the stream: entries added before the group existed are read.
            await self.client.xgroup_create(self.key(shard), GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def publish(self, update: Mapping[str, Any], raw: str | None = None) -> bool:
        """Add an update; False when it was queued (or handled) before. Raises RedisError."""
        update_id = int(update["update_id"])
        chat = chat_of(update)
        data = raw if raw is not None else json.dumps(update, separators=(",", ":"))
        keys = [self.mark_key(update_id), self.key(self.shard_of(chat, update_id))]
        again = "1" if TASK_UPDATE in update else "0"
        added = await self._publish(keys=keys, args=[MARK_TTL_MS, update_id, chat, data, again])
        return bool(added)

    async def read_held(
        self,
        consumer: str,
        leases: Sequence[tuple[int, str]],
        count: int,
        token: str,
        *,
        sweep: bool = False,
    ) -> tuple[list[Entry], dict[int, str]]:
        """New entries (at most `count`) of the shards whose lease (shard, lease key) this
        consumer holds now, and each held shard's last entry id (what `wait` waits past).
        `token` is the read's: the same one as the last read that took entries means that
        read's reply was lost, and the entries still pending for this consumer come first (as
        redelivered); `sweep` returns those in any case."""
        if not leases:
            return [], {}
        keys = [key for _, key in leases] + [self.key(shard) for shard, _ in leases]
        keys.append(f"{self.prefix}q:read:{consumer}")
        args: list[str | int] = [consumer, GROUP, consumer, count, token, READ_TOKEN_MS]
        args.append("1" if sweep else "0")
        reply: Any = await self._read_held(keys=keys, args=args)
        entries: list[Entry] = []
        last: dict[int, str] = {}
        for index, last_id, new, pending in reply:
            shard = leases[int(index)][0]
            last[shard] = str(last_id)
            for raw, redelivered in ((pending, True), (new, False)):
                for entry_id, flat in raw:
                    if flat:  # empty for an entry deleted while pending
                        fields = dict(zip(flat[::2], flat[1::2], strict=True))
                        entries.append(
                            _entry(shard, str(entry_id), fields, redelivered=redelivered)
                        )
        return entries, last

    async def wait(self, last: dict[int, str], block_ms: int) -> None:
        """Until an entry newer than `last` is added to one of these shards, or `block_ms`
        pass. XREAD takes nothing: the fenced read that follows does."""
        if not last:
            return
        streams: dict[Any, Any] = {self.key(shard): last_id for shard, last_id in last.items()}
        await self.client.xread(streams, count=1, block=block_ms)

    async def claim(self, consumer: str, shard: int) -> list[Entry]:
        """Every entry of the shard still pending for any consumer (a worker that died or gave
        the shard up), now this consumer's, oldest first. Only the shard's holder calls this."""
        claimed: list[Entry] = []
        start = "0-0"
        while True:
            reply = await self.client.xautoclaim(
                self.key(shard), GROUP, consumer, min_idle_time=0, start_id=start, count=100
            )
            start, entries = reply[0], reply[1]
            deleted = reply[2] if len(reply) > 2 else []
            claimed.extend(
                _entry(shard, entry_id, fields, redelivered=True)
                for entry_id, fields in entries
                if fields
            )
            if deleted:
                log.warning("stream: %d entr(ies) of shard %d were lost", len(deleted), shard)
            if start == "0-0":
                return claimed

    async def handled(self, update_id: int) -> bool:
        return await self.client.get(self.mark_key(update_id)) == HANDLED

    async def fence(self, entry: Entry, lease_key: str) -> tuple[str | None, str | None]:
        """The holder of the entry's shard and the entry's mark, read together."""
        with unavailable("stream"):
            owner, mark = await self.client.mget(lease_key, self.mark_key(entry.update_id))
        return _text(owner), _text(mark)

    async def ack(self, entry: Entry) -> None:
        """The update is handled: mark it, acknowledge it, delete it, in one step."""
        keys = [self.key(entry.shard), self.mark_key(entry.update_id)]
        with unavailable("stream"):
            await self._ack(keys=keys, args=[GROUP, entry.entry_id, MARK_TTL_MS])

    async def forget_consumers(self, shard: int, keep: set[str]) -> None:
        """Drop consumers of the shard's group that hold nothing and are gone (hygiene: each
        process start adds a consumer name)."""
        for info in await self.client.xinfo_consumers(self.key(shard), GROUP):
            name = info["name"]
            if name not in keep and int(info["pending"]) == 0:
                await self.client.xgroup_delconsumer(self.key(shard), GROUP, name)


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def _entry(shard: int, entry_id: str, fields: dict[str, str], *, redelivered: bool) -> Entry:
    return Entry(
        shard=shard,
        entry_id=entry_id,
        update_id=int(fields["u"]),
        chat=fields.get("c", ""),
        data=fields["d"],
        redelivered=redelivered,
    )
