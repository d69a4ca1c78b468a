"""The two ends of `membot migrate` (memory/migrate/run.py): what each backend keeps of a
conversation besides its messages and meta, read and written.

On the file side a conversation is written to a private directory and renamed into place;
in Redis its meta is written last, with the rest of the small keys, and a conversation
without meta counts as absent: a copy cannot be half-made.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from membot.durable import append_lines, fsync_dir, replace_atomic
from membot.ids import ConversationId
from membot.memory.contract.models import ChatMeta, Message
from membot.memory.contract.repository import ChatRepository
from membot.memory.files.archive import read_text
from membot.memory.files.layout import MESSAGES, META, SUMMARIES_LOG, SUMMARY
from membot.memory.files.repository import FileRepository
from membot.memory.files.smallfiles import FACTS, read_facts, write_json
from membot.memory.migrate.copy import batches
from membot.memory.redis.layout import fact_json, fact_records, meta_to_hash
from membot.memory.redis.repository import RedisRepository
from membot.private import private_dir

BATCH = 1000  # messages per write
BUILDING = ".migrating-"  # a files conversation being copied, renamed into place when done


@dataclass
class Extras:
    """What a conversation keeps beside its messages and meta."""

    summary: str = ""
    summaries: list[str] = field(default_factory=list)  # JSON lines, as Summary.to_json
    facts: list[dict[str, str]] = field(default_factory=list)  # {"text", "added_at"}


class Side(Protocol):
    @property
    def repository(self) -> ChatRepository: ...

    async def exists(self, cid: ConversationId) -> bool: ...

    async def extras(self, cid: ConversationId) -> Extras: ...

    async def write(
        self, cid: ConversationId, meta: ChatMeta, extras: Extras, messages: AsyncIterator[Message]
    ) -> int: ...


class FilesSide:
    def __init__(self, repository: FileRepository) -> None:
        self.repository = repository

    async def exists(self, cid: ConversationId) -> bool:
        return self.repository.conversation_dir(cid).is_dir()

    async def extras(self, cid: ConversationId) -> Extras:
        return await asyncio.to_thread(self._extras_sync, self.repository.conversation_dir(cid))

    @staticmethod
    def _extras_sync(directory: Path) -> Extras:
        try:
            log_lines = (directory / SUMMARIES_LOG).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            log_lines = []
        return Extras(
            summary=read_text(directory / SUMMARY),
            summaries=[line for line in log_lines if line.strip()],
            facts=read_facts(directory / FACTS),
        )

    async def write(
        self, cid: ConversationId, meta: ChatMeta, extras: Extras, messages: AsyncIterator[Message]
    ) -> int:
        root = self.repository.root
        building = root / f"{BUILDING}{cid.namespace}-{cid.key}-{uuid.uuid4().hex}"
        await asyncio.to_thread(private_dir, building)
        count = 0
        async for batch in batches(messages, BATCH):
            payload = "".join(m.to_json() + "\n" for m in batch).encode()
            await asyncio.to_thread(append_lines, building / MESSAGES, payload)
            count += len(batch)
        await asyncio.to_thread(_finish_files, building, meta, extras)
        if await self.exists(cid):
            await self.repository.reset(cid)  # --overwrite
        target = self.repository.conversation_dir(cid)
        await asyncio.to_thread(private_dir, target.parent)
        await asyncio.to_thread(building.rename, target)
        await asyncio.to_thread(fsync_dir, target.parent)
        return count


def _finish_files(directory: Path, meta: ChatMeta, extras: Extras) -> None:
    if extras.summaries:
        log_lines = "".join(line + "\n" for line in extras.summaries)
        append_lines(directory / SUMMARIES_LOG, log_lines.encode())
    if extras.summary:
        replace_atomic(directory / SUMMARY, extras.summary.encode(), sync_dir=False)
    if extras.facts:
        write_json(directory / FACTS, {"facts": extras.facts})
    write_json(directory / META, meta.to_dict())


class RedisSide:
    def __init__(self, repository: RedisRepository) -> None:
        self.repository = repository
        self.client = repository.client

    async def exists(self, cid: ConversationId) -> bool:
        return bool(await self.client.exists(self.repository.keys(cid).meta))

    async def extras(self, cid: ConversationId) -> Extras:
        k = self.repository.keys(cid)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.get(k.summary)
            pipe.lrange(k.summaries, 0, -1)
            pipe.lrange(k.facts, 0, -1)
            summary, summaries, facts = await pipe.execute()
        return Extras(summary=summary or "", summaries=list(summaries), facts=fact_records(facts))

    async def write(
        self, cid: ConversationId, meta: ChatMeta, extras: Extras, messages: AsyncIterator[Message]
    ) -> int:
        repo, k = self.repository, self.repository.keys(cid)
        # Leftovers of an interrupted run (messages without meta), or the copy --overwrite drops.
        await self.client.delete(*k.conversation)
        keep_after = meta.messages_total - repo.max_messages  # what REDIS_MAX_MESSAGES keeps
        count = 0
        async for batch in batches(messages, BATCH):
            kept = {m.to_json(): m.seq for m in batch if m.seq > keep_after}
            if kept:
                await self.client.zadd(k.messages, kept)
                count += len(kept)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.zremrangebyrank(k.messages, 0, -repo.max_messages - 1)
            if extras.summary:
                pipe.set(k.summary, extras.summary)
            if extras.summaries:
                pipe.rpush(k.summaries, *extras.summaries)
            if extras.facts:
                pipe.rpush(k.facts, *(fact_json(f["text"], f["added_at"]) for f in extras.facts))
            if meta.messages_total:
                pipe.set(k.seq, meta.messages_total)
            pipe.hset(k.meta, mapping=meta_to_hash(meta))
            pipe.sadd(k.namespace_index, cid.key)
            if repo.ttl > 0:
                for key in k.conversation:
                    pipe.expire(key, repo.ttl)
            await pipe.execute()
        return count
