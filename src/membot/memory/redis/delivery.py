"""The Redis backend's delivery marks (memory/contract/delivery.py): one hash per namespace,
`{prefix}undelivered:{ns}`, conversation key -> the mark as JSON. The append script sets a
conversation's (HSETNX) in the same step as the answer it stores; start-up reads the hash
alone, whatever the number of conversations. A mark whose conversation expired
(CONVERSATION_TTL) finds no answer left to send and is cleared then."""

from __future__ import annotations

from typing import Protocol, cast

from redis.asyncio import Redis
from redis.typing import EncodableT

from membot.ids import ConversationId, InvalidConversationId
from membot.memory.contract.delivery import DeliveryMark
from membot.memory.redis.layout import Keys
from membot.redis.errors import call

# KEYS[1] the conversation's seq, [2] the namespace's marks; ARGV[1] its key, [2] the answer's
# seq, [3] its parts sent ('' when it is done), [4] '1' when the next one's request is out.
# As delivery.progress, in one step with any append.
MARK = """
local raw = redis.call('HGET', KEYS[2], ARGV[1])
if not raw then return 0 end
local mark = cjson.decode(raw)
local upto = tonumber(ARGV[2])
if ARGV[3] ~= '' then
  local after = math.min(tonumber(mark.after), upto - 1)
  local sending = ''
  if ARGV[4] ~= '' then sending = ',"sending":true' end
  redis.call('HSET', KEYS[2], ARGV[1], string.format(
    '{"after":%d,"seq":%d,"parts":%d%s}', after, upto, tonumber(ARGV[3]), sending))
elseif upto >= tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[2], ARGV[1], string.format(
    '{"after":%d}', math.max(tonumber(mark.after), upto)))
end
return 1
"""


class _Redis(Protocol):
    client: Redis
    prefix: str

    def keys(self, cid: ConversationId) -> Keys: ...


class RedisDeliveries:
    """The delivery methods of the contract, for RedisRepository."""

    async def undelivered(self: _Redis, namespace: str) -> list[ConversationId]:
        found = cast(
            list[str], await call(self.client.hkeys(f"{self.prefix}undelivered:{namespace}"))
        )
        out = []
        for key in found:
            try:
                out.append(ConversationId(namespace, key))
            except InvalidConversationId:
                continue
        return sorted(out)

    async def delivery_mark(self: _Redis, cid: ConversationId) -> DeliveryMark | None:
        raw = await call(self.client.hget(self.keys(cid).undelivered, cid.key))
        return None if raw is None else DeliveryMark.from_json(cast(str, raw))

    async def mark_delivered(
        self: _Redis,
        cid: ConversationId,
        upto: int,
        parts: int | None = None,
        sending: bool = False,
    ) -> None:
        k = self.keys(cid)
        script = self.client.register_script(MARK)
        args: list[EncodableT] = [cid.key, upto, "" if parts is None else parts]
        args.append("1" if sending else "")
        await call(script(keys=[k.seq, k.undelivered], args=args))
