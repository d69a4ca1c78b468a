"""How the Redis backend (memory/redis/repository.py, whose docstring draws the key layout) stores a
conversation: its keys, its records, and the Lua scripts that write them. Every write is one
script, so each is atomic for every client of the server."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from redis.typing import EncodableT, FieldT

from membot.ids import ConversationId
from membot.memory.contract.models import ChatMeta, CorruptRecord, Message, iso, new_generation

log = logging.getLogger(__name__)


class Keys(NamedTuple):
    messages: str
    meta: str
    seq: str
    summary: str
    summaries: str
    facts: str
    namespace_index: str
    files: str
    undelivered: str  # the namespace's delivery marks (memory/redis/delivery.py)

    @property
    def conversation(self) -> list[str]:
        """Every key of the conversation itself (not the shared index)."""
        return [*self[:6], self.files]


def fact_json(text: str, added_at: str) -> str:
    """A fact as the `:facts` list keeps it; `fold` is what the duplicate check compares."""
    record = {"text": text, "added_at": added_at, "fold": text.casefold()}
    return json.dumps(record, ensure_ascii=False)


def decode_messages(cid: ConversationId, lines: Sequence[str]) -> list[Message]:
    messages = []
    for line in lines:
        try:
            messages.append(Message.from_json(line))
        except CorruptRecord as exc:
            log.warning("%s: skipping an unreadable message (%s)", cid, exc)
    return messages


def meta_from_hash(cid: ConversationId, seq: str | None, data: dict[str, str]) -> ChatMeta:
    """ChatMeta from the `:meta` hash and the `:seq` counter; a fresh one when there is none."""
    if not data.get("generation"):
        return ChatMeta(conversation=cid, generation=new_generation())
    fields: dict[str, Any] = {**data, "messages_total": int(seq or 0)}
    try:
        fields["state"] = json.loads(data["state"]) if data.get("state") else None
    except ValueError as exc:
        raise CorruptRecord(f"{cid}: unreadable state ({exc})") from None
    return ChatMeta.from_dict(fields, cid)


def fact_texts(lines: Sequence[str]) -> list[str]:
    return [fact["text"] for fact in fact_records(lines)]


def meta_to_hash(meta: ChatMeta) -> dict[FieldT, EncodableT]:
    """ChatMeta as the fields of the `:meta` hash (the inverse of meta_from_hash)."""
    fields: dict[FieldT, EncodableT] = {
        "generation": meta.generation,
        "summarized_upto": meta.summarized_upto,
        "summaries_made": meta.summaries_made,
        "state": json.dumps(meta.state.to_dict(), ensure_ascii=False),
        "state_seq": meta.state_seq,
    }
    for name in ("created_at", "updated_at", "last_summary_at"):
        if (ts := getattr(meta, name)) is not None:
            fields[name] = iso(ts)
    return fields


def fact_records(lines: Sequence[str]) -> list[dict[str, str]]:
    """The `:facts` list as facts.json keeps it: {"text", "added_at"}."""
    facts = []
    for line in lines:
        try:
            record = json.loads(line)
            facts.append({"text": str(record["text"]), "added_at": str(record.get("added_at"))})
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipping an unreadable fact (%s)", exc)
    return facts


# Message.to_json always begins with the seq; the append script writes the real one there.
SEQ_HEAD = '{"seq":0,'

# Every script gets the same KEYS (`Keys`, in order) and begins its ARGV with: now, a fresh
# generation, the TTL, the conversation's key in the index. KEYS[8] is the files hash (after
# the index, which scripts have long found at KEYS[7]). `touch` is what every write that
# is activity does: create the conversation's generation if it has none (its first write),
# index it, and give every key of it a fresh TTL.
PRELUDE = """
local function touch()
  redis.call('HSETNX', KEYS[2], 'generation', ARGV[2])
  redis.call('HSETNX', KEYS[2], 'created_at', ARGV[1])
  redis.call('SADD', KEYS[7], ARGV[4])
  local ttl = tonumber(ARGV[3])
  if ttl > 0 then
    for i = 1, 6 do redis.call('EXPIRE', KEYS[i], ttl) end
    redis.call('EXPIRE', KEYS[8], ttl)
  end
end
"""

# ARGV[5] the file's key, [6] its bytes as base64 (the one client decodes replies as text).
# Activity: the file lives, and expires, with the conversation.
PUT_FILE = """
redis.call('HSET', KEYS[8], ARGV[5], ARGV[6])
touch()
return 1
"""

# ARGV[5] the turn's token, [6] REDIS_MAX_MESSAGES, [7] state JSON or '', [8] '1' when the
# turn holds an answer to send (it leaves a delivery mark in KEYS[9] unless there is one),
# [9..] each message's JSON without its head (`SEQ_HEAD`). The token makes a resent call
# (redis-py retries a call whose reply was lost) return the turn already stored instead of
# storing it twice; under the turn lock the previous append of a conversation is always the
# one being resent.
APPEND = """
if redis.call('HGET', KEYS[2], 'turn') == ARGV[5] then
  return tonumber(redis.call('HGET', KEYS[2], 'turn_seq'))
end
local n = #ARGV - 8
local last = redis.call('INCRBY', KEYS[3], n)
local first = last - n + 1
for i = 1, n do
  local seq = string.format('%d', first + i - 1)
  redis.call('ZADD', KEYS[1], seq, '{"seq":' .. seq .. ',' .. ARGV[8 + i])
end
if ARGV[8] ~= '' then
  redis.call('HSETNX', KEYS[9], ARGV[4], '{"after":' .. string.format('%d', first - 1) .. '}')
end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -tonumber(ARGV[6]) - 1)
redis.call('HSET', KEYS[2], 'updated_at', ARGV[1], 'turn', ARGV[5], 'turn_seq', first)
if ARGV[7] ~= '' then redis.call('HSET', KEYS[2], 'state', ARGV[7], 'state_seq', last) end
touch()
return first
"""

# ARGV[5] the generation the summarizer read, [6] the text, [7] its log line, [8] covers_to.
# Not activity: no touch; the new keys expire with the conversation, whose TTL stays.
SAVE_SUMMARY = """
if redis.call('HGET', KEYS[2], 'generation') ~= ARGV[5] then return 0 end
if redis.call('LINDEX', KEYS[5], -1) == ARGV[7] then return 1 end
redis.call('SET', KEYS[4], ARGV[6])
redis.call('RPUSH', KEYS[5], ARGV[7])
if tonumber(ARGV[8]) > tonumber(redis.call('HGET', KEYS[2], 'summarized_upto') or '0') then
  redis.call('HSET', KEYS[2], 'summarized_upto', ARGV[8])
end
redis.call('HINCRBY', KEYS[2], 'summaries_made', 1)
redis.call('HSET', KEYS[2], 'last_summary_at', ARGV[1])
local pttl = redis.call('PTTL', KEYS[2])
if pttl > 0 then redis.call('PEXPIRE', KEYS[4], pttl); redis.call('PEXPIRE', KEYS[5], pttl) end
return 1
"""

# ARGV[5] the state JSON. Later than every turn's state: state_seq is the last seq.
SET_STATE = """
local seq = redis.call('GET', KEYS[3]) or '0'
redis.call('HSET', KEYS[2], 'state', ARGV[5], 'state_seq', seq, 'updated_at', ARGV[1])
touch()
return {seq, redis.call('HGETALL', KEYS[2])}
"""

# ARGV[5] the fact casefolded (in Python: Lua's lower() knows ASCII only), [6] its JSON,
# [7] the cap. 1 kept, 0 a duplicate, -1 full.
ADD_FACT = """
local facts = redis.call('LRANGE', KEYS[6], 0, -1)
for _, item in ipairs(facts) do
  local ok, fact = pcall(cjson.decode, item)
  if ok and type(fact) == 'table' and fact.fold == ARGV[5] then return 0 end
end
if #facts >= tonumber(ARGV[7]) then return -1 end
redis.call('RPUSH', KEYS[6], ARGV[6])
touch()
return 1
"""

# ARGV[5..] the exact texts to drop; returns the dropped ones, in stored order.
REMOVE_FACTS = """
local drop, kept, removed = {}, {}, {}
for i = 5, #ARGV do drop[ARGV[i]] = true end
for _, item in ipairs(redis.call('LRANGE', KEYS[6], 0, -1)) do
  local ok, fact = pcall(cjson.decode, item)
  if ok and type(fact) == 'table' and drop[fact.text] then
    removed[#removed + 1] = fact.text
  else
    kept[#kept + 1] = item
  end
end
if #removed > 0 then
  redis.call('DEL', KEYS[6])
  for _, item in ipairs(kept) do redis.call('RPUSH', KEYS[6], item) end
  touch()
end
return removed
"""

# KEYS[1] the index, KEYS[2..] the candidates' meta keys, ARGV their index entries. A
# conversation whose keys expired (CONVERSATION_TTL) leaves the index here; checked and
# removed in one step, so an append re-adding it meanwhile cannot be undone.
PRUNE = """
local live = {}
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then live[#live + 1] = ARGV[i - 1]
  else redis.call('SREM', KEYS[1], ARGV[i - 1]) end
end
return live
"""


def new_turn_token() -> str:
    """The token an append of a turn carries: replayed after a lost reply, a turn Redis
    already holds is not stored twice (the append script compares it)."""
    return uuid.uuid4().hex
