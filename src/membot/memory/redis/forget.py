"""Forgetting messages in the Redis backend (/forget; the contract is memory/contract/
repository.py `forget`): the messages read, then one script that puts each one's tombstone in
its place, deletes their files, cuts the summaries log before the first of them (or the first
summary saying the words; the summary before that point is current again) and gives the
conversation a new generation."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.typing import EncodableT

from membot.ids import ConversationId
from membot.memory.contract.forgetting import summary_cut
from membot.memory.redis.layout import PRELUDE, Keys, decode_messages
from membot.redis.errors import call

log = logging.getLogger(__name__)

# ARGV[5] the first forgotten seq, [6] n, then n pairs (seq, the tombstone's line), then the
# file keys to delete. A seq trimmed away meanwhile (REDIS_MAX_MESSAGES) is not put back.
# Not activity: no touch; the summary keys keep the conversation's TTL.
FORGET = """
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local first = tonumber(ARGV[5])
local n = tonumber(ARGV[6])
local found = 0
for i = 0, n - 1 do
  local seq = ARGV[7 + 2 * i]
  if redis.call('ZREMRANGEBYSCORE', KEYS[1], seq, seq) > 0 then
    redis.call('ZADD', KEYS[1], seq, ARGV[8 + 2 * i])
    found = found + 1
  end
end
for i = 7 + 2 * n, #ARGV do redis.call('HDEL', KEYS[8], ARGV[i]) end
local kept = {}
for _, item in ipairs(redis.call('LRANGE', KEYS[5], 0, -1)) do
  local ok, s = pcall(cjson.decode, item)
  if ok and type(s) == 'table' and tonumber(s.covers_to) and tonumber(s.covers_to) < first
     and type(s.text) == 'string' then
    kept[#kept + 1] = {item, s}
  end
end
redis.call('DEL', KEYS[5])
if #kept > 0 then
  for _, pair in ipairs(kept) do redis.call('RPUSH', KEYS[5], pair[1]) end
  local last = kept[#kept][2]
  redis.call('SET', KEYS[4], string.match(last.text, '^%s*(.-)%s*$'))
  redis.call('HSET', KEYS[2], 'summarized_upto', string.format('%d', last.covers_to),
    'summaries_made', #kept, 'last_summary_at', tostring(last.ts))
  local pttl = redis.call('PTTL', KEYS[2])
  if pttl > 0 then redis.call('PEXPIRE', KEYS[4], pttl); redis.call('PEXPIRE', KEYS[5], pttl) end
else
  redis.call('DEL', KEYS[4])
  redis.call('HSET', KEYS[2], 'summarized_upto', 0, 'summaries_made', 0)
  redis.call('HDEL', KEYS[2], 'last_summary_at')
end
redis.call('HSET', KEYS[2], 'generation', ARGV[2])
return found
"""


class _Redis(Protocol):
    client: Redis

    def keys(self, cid: ConversationId) -> Keys: ...

    async def _run(
        self, script: AsyncScript, cid: ConversationId, *args: EncodableT, now: str = ""
    ) -> Any: ...

    async def remove_facts(self, cid: ConversationId, facts: Sequence[str]) -> list[str]: ...


class RedisForget:
    """The contract's `forget`, for RedisRepository."""

    async def forget(
        self: _Redis,
        cid: ConversationId,
        seqs: Sequence[int],
        facts: Sequence[str] = (),
        summaries: Callable[[str], bool] | None = None,
    ) -> int:
        found = 0
        wanted = sorted(set(seqs))
        logged: list[tuple[int, str]] = []
        current = ""
        if summaries is not None:
            logged, current = await _summaries(self.client, self.keys(cid))
        # Appended to at the end only: a summary saved meanwhile comes after the cut.
        cut = summary_cut(wanted, facts, logged, current, summaries)
        if cut is not None:
            key = self.keys(cid).messages
            async with self.client.pipeline(transaction=False) as pipe:
                for seq in wanted:
                    pipe.zrangebyscore(key, seq, seq)
                pages = cast(list[list[str]], await call(pipe.execute()))
            messages = decode_messages(cid, [line for page in pages for line in page])
            pairs: list[EncodableT] = []
            for message in messages:
                pairs += [message.seq, message.tombstone().to_json()]
            files = [a.file for m in messages for a in m.attachments if a.file]
            script = self.client.register_script(PRELUDE + FORGET)
            args = (cut, len(pairs) // 2, *pairs, *files)
            found = int(await self._run(script, cid, *args))
        if facts:
            await self.remove_facts(cid, facts)
        if found:
            log.info("%s: %d message(s) forgotten", cid, found)
        return found


async def _summaries(client: Redis, keys: Keys) -> tuple[list[tuple[int, str]], str]:
    """The summaries log's (covers_to, text), oldest first, and the current summary."""
    async with client.pipeline(transaction=False) as pipe:
        pipe.lrange(keys.summaries, 0, -1)
        pipe.get(keys.summary)
        items, current = await call(pipe.execute())
    logged: list[tuple[int, str]] = []
    for item in cast(list[str], items):
        with contextlib.suppress(ValueError, KeyError, TypeError):
            record = json.loads(item)
            if isinstance(record["text"], str):
                logged.append((int(record["covers_to"]), record["text"]))
    return logged, str(current or "")
