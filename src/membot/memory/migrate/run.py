"""`membot migrate --from files --to redis` (and back): copy every conversation of both
namespaces, with all a backend keeps of it: the messages with their seq, the summary and the
summaries log, the facts, meta (generation, state, counters, timestamps), and its files.
Then the further copies its caller gives (`also`: the chats' tasks, membot/schedule/migrate.py),
each with the same settings, inside the same run.

Idempotent: a conversation the target already holds identically is skipped, so a second run
copies nothing. One the target holds differently (the bot ran on the target since) is left
alone and reported, unless `--overwrite`. Copies cannot be half-made (memory/migrate/sides.py).
Run it with the bot stopped.

It needs only DATA_DIR and the Redis settings, never the Telegram or OpenRouter tokens.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membot.config import ConfigError, load_subset
from membot.ids import NAMESPACES, ConversationId
from membot.memory.contract.models import ChatMeta
from membot.memory.contract.repository import StorageUnavailable
from membot.memory.files.repository import FileRepository
from membot.memory.migrate.copy import copy_files
from membot.memory.migrate.sides import BUILDING, Extras, FilesSide, RedisSide, Side
from membot.memory.redis.repository import RedisRepository
from membot.redis.client import create_client
from membot.redis.errors import unavailable

BACKENDS = ("files", "redis")
_FIELDS = ("data_dir", "redis_url", "redis_prefix", "redis_max_messages", "conversation_ttl")


@dataclass
class Report:
    conversations: int = 0
    copied: int = 0
    skipped: int = 0
    messages: int = 0
    files: int = 0
    conflicts: list[ConversationId] = field(default_factory=list)


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


# A further copy after the conversations' (the chats' tasks): given the storage settings,
# its line of the report and what it left alone (the target holds a different copy).
Further = Callable[[StorageConfig], Awaitable[tuple[str, list[str]]]]


def open_side(kind: str, config: StorageConfig) -> Side:
    if kind == "files":
        return FilesSide(FileRepository(config.data_dir))
    client, prefix = create_client(config.redis_url), config.redis_prefix
    limits = {"max_messages": config.redis_max_messages, "ttl": config.conversation_ttl}
    return RedisSide(RedisRepository(client, prefix=prefix, **limits))


async def _run(
    source: str, target: str, config: StorageConfig, overwrite: bool, also: Sequence[Further]
) -> tuple[Report, list[tuple[str, list[str]]]]:
    src, dst = open_side(source, config), open_side(target, config)
    try:
        if isinstance(dst, FilesSide):
            # Copies a crash interrupted: never renamed into place, so nothing refers to them.
            for leftover in config.data_dir.glob(f"{BUILDING}*"):
                shutil.rmtree(leftover, ignore_errors=True)
        report = await migrate(src, dst, overwrite=overwrite)
    finally:
        await src.repository.close()
        await dst.repository.close()
    # After the conversations: a files conversation copied is renamed into place whole, and
    # what a further copy writes into its directory must not be there before.
    return report, [await copy(config) for copy in also]


def run_migrate(
    source: str, target: str, *, overwrite: bool = False, also: Sequence[Further] = ()
) -> int:
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
            report, further = asyncio.run(_run(source, target, config, overwrite, also))
    except StorageUnavailable as exc:
        print(f"membot migrate: Redis failed: {exc.__cause__ or exc}", file=sys.stderr)
        return 1
    print(
        f"migrated {source} -> {target}: {report.conversations} conversations "
        f"({report.copied} copied, {report.skipped} skipped as already there, "
        f"{len(report.conflicts)} conflicting), {report.messages} messages copied "
        f"with {report.files} files"
    )
    conflicts = [str(cid) for cid in report.conflicts]
    for line, left in further:
        print(line)
        conflicts.extend(left)
    if conflicts:
        print(
            f"membot migrate: left alone, the target holds a different copy: "
            f"{', '.join(conflicts)} (--overwrite replaces them)",
            file=sys.stderr,
        )
        return 1
    return 0
