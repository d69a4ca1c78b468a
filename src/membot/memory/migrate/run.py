"""`membot migrate --from files --to redis` (and back): copy every conversation of both
namespaces, with all a backend keeps of it: the messages with their seq, the summary and the
summaries log, the facts, meta (generation, state, counters, timestamps), and its files.

Idempotent: a conversation the target already holds identically is skipped, so a second run
copies nothing. One the target holds differently (the bot ran on the target since) is left
alone and reported, unless `--overwrite`. Copies cannot be half-made: on the file side a
conversation is written to a private directory and renamed into place; in Redis its meta is
written last, with the rest of the small keys, and a conversation without meta counts as absent.
Run it with the bot stopped.

It needs only DATA_DIR and the Redis settings, never the Telegram or OpenRouter tokens.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from membot.config import ConfigError, load_subset
from membot.durable import append_lines, fsync_dir, replace_atomic
from membot.ids import NAMESPACES, ConversationId
from membot.memory.contract.models import ChatMeta, Message
from membot.memory.contract.repository import ChatRepository, StorageUnavailable
from membot.memory.files.archive import read_text
from membot.memory.files.layout import MESSAGES, META, SUMMARIES_LOG, SUMMARY
from membot.memory.files.repository import FileRepository
from membot.memory.files.smallfiles import FACTS, read_facts, write_json
from membot.memory.migrate.copy import batches, copy_files
from membot.memory.redis.layout import fact_json, fact_records, meta_to_hash
from membot.memory.redis.repository import RedisRepository
from membot.private import private_dir
from membot.redis.client import create_client
from membot.redis.errors import unavailable

BACKENDS = ("files", "redis")
BATCH = 1000  # messages per write
_FIELDS = ("data_dir", "redis_url", "redis_prefix", "redis_max_messages", "conversation_ttl")
_BUILDING = ".migrating-"  # a files conversation being copied, renamed into place when done


@dataclass
class Extras:
    """What a conversation keeps beside its messages and meta."""

    summary: str = ""
    summaries: list[str] = field(default_factory=list)  # JSON lines, as Summary.to_json
    facts: list[dict[str, str]] = field(default_factory=list)  # {"text", "added_at"}


@dataclass
class Report:
    conversations: int = 0
    copied: int = 0
    skipped: int = 0
    messages: int = 0
    files: int = 0
    conflicts: list[ConversationId] = field(default_factory=list)


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
        building = root / f"{_BUILDING}{cid.namespace}-{cid.key}-{uuid.uuid4().hex}"
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


def _fingerprint(meta: ChatMeta, extras: Extras) -> tuple[Any, ...]:
    """What must match for the target's copy to be this one. Not the generation: the file
    backend names a conversation without meta.json anew on every read."""
    return (
        meta.messages_total,
        meta.summarized_upto,
        meta.summaries_made,
        meta.state,
        extras.summary,
        len(extras.summaries),
        [f["text"] for f in extras.facts],
    )


async def migrate(source: Side, target: Side, *, overwrite: bool = False) -> Report:
    report = Report()
    for namespace in NAMESPACES:
        for cid in await source.repository.conversations(namespace):
            report.conversations += 1
            meta = await source.repository.get_meta(cid)
            extras = await source.extras(cid)
            if await target.exists(cid):
                there = await target.repository.get_meta(cid)
                if _fingerprint(there, await target.extras(cid)) == _fingerprint(meta, extras):
                    report.skipped += 1
                    continue
                if not overwrite:
                    report.conflicts.append(cid)
                    continue
            stream = source.repository.iter_messages(cid)
            try:
                report.messages += await target.write(cid, meta, extras, stream)
            finally:
                await stream.aclose()
            report.files += await copy_files(source.repository, target.repository, cid)
            report.copied += 1
    return report


@dataclass(frozen=True)
class StorageConfig:
    data_dir: Path
    redis_url: str
    redis_prefix: str
    redis_max_messages: int
    conversation_ttl: int


def load_storage_config(**overrides: Any) -> StorageConfig:
    """The storage settings from the environment and ./.env; ValueError with one line."""
    try:
        values = load_subset(*_FIELDS, **overrides)
    except ConfigError as exc:
        raise ValueError(str(exc).removeprefix("configuration error: ")) from None
    values["redis_url"] = values["redis_url"].get_secret_value()
    return StorageConfig(**values)


def open_side(kind: str, config: StorageConfig) -> Side:
    if kind == "files":
        return FilesSide(FileRepository(config.data_dir))
    client, prefix = create_client(config.redis_url), config.redis_prefix
    limits = {"max_messages": config.redis_max_messages, "ttl": config.conversation_ttl}
    return RedisSide(RedisRepository(client, prefix=prefix, **limits))


async def _run(source: str, target: str, config: StorageConfig, overwrite: bool) -> Report:
    src, dst = open_side(source, config), open_side(target, config)
    try:
        if isinstance(dst, FilesSide):
            # Copies a crash interrupted: never renamed into place, so nothing refers to them.
            for leftover in config.data_dir.glob(f"{_BUILDING}*"):
                shutil.rmtree(leftover, ignore_errors=True)
        return await migrate(src, dst, overwrite=overwrite)
    finally:
        await src.repository.close()
        await dst.repository.close()


def run_migrate(source: str, target: str, *, overwrite: bool = False) -> int:
    """The `membot migrate` command; the exit status for the shell."""
    if source == target or {source, target} != set(BACKENDS):
        print("membot migrate: --from and --to must be files and redis, one each", file=sys.stderr)
        return 2
    try:
        config = load_storage_config()
    except ValueError as exc:
        print(f"membot migrate: {exc}", file=sys.stderr)
        return 2
    try:
        with unavailable("migrate"):  # the copy's own calls, besides the repository's
            report = asyncio.run(_run(source, target, config, overwrite))
    except StorageUnavailable as exc:
        print(f"membot migrate: Redis failed: {exc.__cause__ or exc}", file=sys.stderr)
        return 1
    print(
        f"migrated {source} -> {target}: {report.conversations} conversations "
        f"({report.copied} copied, {report.skipped} skipped as already there, "
        f"{len(report.conflicts)} conflicting), {report.messages} messages copied "
        f"with {report.files} files"
    )
    if report.conflicts:
        shown = ", ".join(str(cid) for cid in report.conflicts)
        print(
            f"membot migrate: left alone, the target holds a different copy: {shown} "
            "(--overwrite replaces them)",
            file=sys.stderr,
        )
        return 1
    return 0
