"""The Redis backend (`STORAGE=redis`): one conversation, a few keys, every write one Lua script.

Keys, all under REDIS_PREFIX (default `membot:`), named from `str(cid)` alone:
    {prefix}conv:{ns}:{key}:messages   ZSET  score = seq, member = the message's JSON line
    {prefix}conv:{ns}:{key}:seq        STRING  the last seq given out (= messages_total)
    {prefix}conv:{ns}:{key}:meta       HASH  generation, created_at, updated_at, last_summary_at,
                                       summarized_upto, summaries_made, state (JSON),
                                       state_seq, turn / turn_seq (the last append's token)
    {prefix}conv:{ns}:{key}:summary    STRING  the current rolling summary, plain text
    {prefix}conv:{ns}:{key}:summaries  LIST  every summary kept, as JSON (as summaries.log)
    {prefix}conv:{ns}:{key}:facts      LIST  {"text", "added_at", "fold"} JSON, oldest first
    {prefix}conv:{ns}:{key}:files      HASH  file key -> the file's bytes as base64 (images,
                                       documents' text; the client decodes replies as text)
    {prefix}conversations:{ns}         SET   the keys of the namespace's conversations
    {prefix}undelivered:{ns}           HASH  key -> delivery mark JSON (memory/contract/delivery.py)

Every write is one Lua script (memory/redis/layout.py, forget.py), atomic for all the server's
clients: seqs come from Redis (INCRBY); no WATCH or retry loop; multi-key reads: MULTI.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace
from typing import Any, cast

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.typing import EncodableT

from membot.clock import utc_now
from membot.errors import StorageRefused, StorageUnavailable
from membot.ids import NAMESPACES, ConversationId, InvalidConversationId
from membot.memory.contract.attachment import check_file_key
from membot.memory.contract.models import (
    ChatContext,
    ChatMeta,
    Message,
    Summary,
    iso,
    new_generation,
)
from membot.memory.contract.state import ConversationState
from membot.memory.redis.delivery import RedisDeliveries
from membot.memory.redis.forget import RedisForget
from membot.memory.redis.layout import (
    ADD_FACT,
    APPEND,
    PRELUDE,
    PRUNE,
    PUT_FILE,
    REMOVE_FACTS,
    SAVE_SUMMARY,
    SEQ_HEAD,
    SET_STATE,
    Keys,
    decode_messages,
    fact_json,
    fact_texts,
    meta_from_hash,
    new_turn_token,
)
from membot.redis.errors import call

log = logging.getLogger(__name__)

PAGE = 500  # messages per read of iter_messages, conversations per prune batch


class RedisRepository(RedisDeliveries, RedisForget):
    """ChatRepository in Redis. Safe for any number of processes sharing one server."""

    def __init__(
        self, client: Redis, *, prefix: str = "membot:", max_messages: int = 10_000, ttl: int = 0
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.max_messages = max_messages
        self.ttl = ttl
        self._append = client.register_script(PRELUDE + APPEND)
        self._save_summary = client.register_script(SAVE_SUMMARY)
        self._set_state = client.register_script(PRELUDE + SET_STATE)
        self._add_fact = client.register_script(PRELUDE + ADD_FACT)
        self._remove_facts = client.register_script(PRELUDE + REMOVE_FACTS)
        self._prune = client.register_script(PRUNE)
        self._put_file = client.register_script(PRELUDE + PUT_FILE)

    def keys(self, cid: ConversationId) -> Keys:
        base = self._base(cid.namespace, cid.key)
        return Keys(
            messages=base + "messages",
            meta=base + "meta",
            seq=base + "seq",
            summary=base + "summary",
            summaries=base + "summaries",
            facts=base + "facts",
            namespace_index=self.index_key(cid.namespace),
            files=base + "files",
            undelivered=f"{self.prefix}undelivered:{cid.namespace}",
        )

    def _base(self, namespace: str, key: str) -> str:
        return f"{self.prefix}conv:{namespace}:{key}:"

    def index_key(self, namespace: str) -> str:
        return f"{self.prefix}conversations:{namespace}"

    async def _run(
        self, script: AsyncScript, cid: ConversationId, *args: EncodableT, now: str = ""
    ) -> Any:
        head = (now or iso(utc_now()), new_generation(), self.ttl, cid.key)
        return await call(script(keys=list(self.keys(cid)), args=[*head, *args]))

    # -- reading -------------------------------------------------------------------------

    async def tail(self, cid: ConversationId, limit: int) -> list[Message]:
        if limit <= 0:
            return []
        lines = await call(self.client.zrange(self.keys(cid).messages, -limit, -1))
        return decode_messages(cid, cast(list[str], lines))

    async def context(self, cid: ConversationId, limit: int) -> ChatContext:
        k = self.keys(cid)
        # MULTI/EXEC: one consistent snapshot, never half of a concurrent append.
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.zrange(k.messages, -max(limit, 1), -1)
            pipe.get(k.summary)
            pipe.lrange(k.facts, 0, -1)
            pipe.get(k.seq)
            pipe.hgetall(k.meta)
            lines, summary, facts, seq, meta = await call(pipe.execute())
        return ChatContext(
            history=decode_messages(cid, lines) if limit > 0 else [],
            summary=summary or "",
            meta=meta_from_hash(cid, seq, meta),
            facts=fact_texts(facts),
        )

    async def iter_messages(
        self, cid: ConversationId, after_seq: int = 0
    ) -> AsyncGenerator[Message, None]:
        # Paged by score, each page starting after the last seq seen: a ZSET finds it in
        # O(log n), and an append or trim between pages cannot shift what comes next.
        key, low = self.keys(cid).messages, after_seq
        while page := cast(
            list[tuple[str, float]],
            await call(
                self.client.zrangebyscore(
                    key, f"({low}", "+inf", start=0, num=PAGE, withscores=True
                )
            ),
        ):
            for message in decode_messages(cid, [line for line, _ in page]):
                yield message
            if len(page) < PAGE:
                return
            low = int(page[-1][1])

    async def get_summary(self, cid: ConversationId) -> str:
        return cast(str | None, await call(self.client.get(self.keys(cid).summary))) or ""

    async def get_meta(self, cid: ConversationId) -> ChatMeta:
        k = self.keys(cid)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.get(k.seq)
            pipe.hgetall(k.meta)
            seq, meta = await call(pipe.execute())
        return meta_from_hash(cid, seq, meta)

    async def get_facts(self, cid: ConversationId) -> list[str]:
        facts = await call(self.client.lrange(self.keys(cid).facts, 0, -1))
        return fact_texts(cast(list[str], facts))

    async def conversations(self, namespace: str) -> list[ConversationId]:
        if namespace not in NAMESPACES:
            return []
        index, found, cursor = self.index_key(namespace), list[ConversationId](), 0
        while True:
            cursor, found_now = await call(self.client.sscan(index, cursor, count=PAGE))
            batch = cast(list[str], found_now)
            metas = [self._base(namespace, member) + "meta" for member in batch]
            live = await call(self._prune(keys=[index, *metas], args=batch)) if batch else []
            for member in live:
                try:
                    found.append(ConversationId(namespace, member))
                except InvalidConversationId:
                    log.warning("ignoring an invalid entry in %s", index)
            if not cursor:
                return sorted(set(found))  # SSCAN may return a member twice

    # -- writing -------------------------------------------------------------------------

    async def append(
        self,
        cid: ConversationId,
        messages: Sequence[Message],
        state: ConversationState | None = None,
    ) -> list[Message]:
        return await self.append_turn(cid, messages, state, new_turn_token())

    async def append_turn(
        self,
        cid: ConversationId,
        messages: Sequence[Message],
        state: ConversationState | None,
        token: str,
    ) -> list[Message]:
        """`append` with the turn's token given: sending the same turn again (a spooled turn
        replayed, memory/outage/repository.py) returns the stored one if it was the last append."""
        if not messages:
            return []
        if state is not None:
            messages = [*messages[:-1], replace(messages[-1], state=state)]
        heads = [m.to_json() for m in (replace(m, seq=0) for m in messages)]
        if not all(line.startswith(SEQ_HEAD) for line in heads):  # pragma: no cover
            raise AssertionError("Message.to_json no longer begins with the seq")
        state_json = json.dumps(state.to_dict(), ensure_ascii=False) if state else ""
        first = await self._run(
            self._append,
            cid,
            token,
            self.max_messages,
            state_json,
            "1" if any(m.delivery is not None for m in messages) else "",
            *(line[len(SEQ_HEAD) :] for line in heads),
        )
        return [replace(m, seq=int(first) + i) for i, m in enumerate(messages)]

    async def save_summary(
        self, cid: ConversationId, text: str, covers_from: int, covers_to: int, generation: str
    ) -> bool:
        summary = Summary(text=text, covers_from=covers_from, covers_to=covers_to)
        saved = await self._run(
            self._save_summary,
            cid,
            generation,
            text.strip(),
            summary.to_json(),
            covers_to,
            now=iso(summary.ts),  # last_summary_at is the summary's own time
        )
        if not saved:
            log.info("%s: dropping a summary made before a reset", cid)
        return bool(saved)

    async def set_state(self, cid: ConversationId, state: ConversationState) -> ChatMeta:
        state_json = json.dumps(state.to_dict(), ensure_ascii=False)
        seq, flat = await self._run(self._set_state, cid, state_json)
        return meta_from_hash(cid, seq, dict(zip(flat[::2], flat[1::2], strict=True)))

    async def add_fact(self, cid: ConversationId, fact: str, limit: int) -> bool | None:
        as_json = fact_json(fact, iso(utc_now()))
        kept = await self._run(self._add_fact, cid, fact.casefold(), as_json, limit)
        return None if kept == -1 else bool(kept)

    async def remove_facts(self, cid: ConversationId, facts: Sequence[str]) -> list[str]:
        if not facts:
            return []
        return list(await self._run(self._remove_facts, cid, *facts))

    async def put_file(self, cid: ConversationId, key: str, data: bytes) -> None:
        encoded = base64.b64encode(data).decode("ascii")
        await self._run(self._put_file, cid, check_file_key(key), encoded)

    async def get_file(self, cid: ConversationId, key: str) -> bytes | None:
        found = await call(self.client.hget(self.keys(cid).files, check_file_key(key)))
        return None if found is None else base64.b64decode(cast(str, found))

    async def reset(self, cid: ConversationId) -> None:
        k = self.keys(cid)
        # Every key at once (MULTI/EXEC), the index entry with them: no reader sees half.
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.delete(*k.conversation)
            pipe.srem(k.namespace_index, cid.key)
            pipe.hdel(k.undelivered, cid.key)
            await call(pipe.execute())

    async def check(self) -> bool:
        """PING the server and warn when it persists nothing; False when it is unreachable."""
        try:
            await call(self.client.ping())
        except StorageUnavailable as exc:
            log.warning("Redis is unreachable at start-up: %s", exc.__cause__ or exc)
            return False
        try:
            config = await call(self.client.config_get("appendonly"))
            config.update(await call(self.client.config_get("save")))
        except StorageRefused as exc:  # CONFIG renamed or disabled, as managed services do
            log.info("cannot read Redis persistence settings (%s)", exc.__cause__)
            return True
        if config.get("appendonly") != "yes" and not (config.get("save") or "").strip():
            log.warning("Redis persists nothing: a Redis restart loses every conversation")
        return True

    async def close(self) -> None:
        await self.client.aclose()
