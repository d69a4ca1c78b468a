"""Forgetting in a long chat (/forget, core/forget.py): a chat of 100,000 messages (the search
bench's generated chat; 10,000 with --quick), ten of them given a word found nowhere else,
with ten summaries in its log (those made after the first of the ten quote the word), a fact
holding the word and its search index built. On files, and on Redis where it answers.

Timed: finding the ten (what /forget lists), and confirming (found again, the archive
rewritten or its entries replaced, the summaries cut, the fact dropped, the search index
deleted and built again); the index's rebuild is timed again alone. Then the word is looked
for everywhere: every file under DATA_DIR (the index's -wal and -shm included), every Redis
key under the bench's prefix, and the chat's search. The rows say how many still hold it.
"""

from __future__ import annotations

import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.fakes.search_corpus import generate_conversation

from bench.core import REDIS_URL, Row, redis_scratch, row
from membot.core.forget import Forgetting
from membot.ids import ConversationId
from membot.memory import ChatRepository, FileRepository
from membot.memory.redis import RedisRepository
from membot.redis.client import create_client
from membot.search import HistorySearch
from membot.tasks import TaskSupervisor

BENCHMARK = "forget"
CHAT = ConversationId.telegram(100_600)
MESSAGES = 100_000
QUICK_MESSAGES = 10_000
FORGOTTEN = 10
WORD = "quokkazephyr7"
BATCH = 5_000


async def _fill(repo: ChatRepository, search: HistorySearch, n: int) -> list[int]:
    """The chat stored, summarized and indexed; the seqs that hold the word."""
    messages = generate_conversation(n).messages
    planted = sorted(random.Random(3).sample(range(n), FORGOTTEN))
    for i in planted:
        messages[i] = replace(messages[i], content=f"{messages[i].content} {WORD}")
    for start in range(0, n, BATCH):
        await repo.append(CHAT, messages[start : start + BATCH])
    generation = (await repo.get_meta(CHAT)).generation
    step = n // 10
    for k in range(1, 11):
        quoted = f" {WORD}" if k * step >= planted[0] + 1 else ""
        text = f"Summary up to message {k * step}.{quoted}"
        await repo.save_summary(CHAT, text, (k - 1) * step + 1, k * step, generation)
    await repo.add_fact(CHAT, f"The code word is {WORD}", 100)
    await search.search(CHAT, "builds the index")
    return [i + 1 for i in planted]


def _files_holding(root: Path) -> int:
    needle = WORD.encode()
    return sum(needle in p.read_bytes() for p in root.rglob("*") if p.is_file())


async def _keys_holding(repo: RedisRepository) -> int:
    client, found = repo.client, 0
    async for key in client.scan_iter(match=f"{repo.prefix}*", count=1000):
        kind = await client.type(key)
        if kind == "string":
            values = [str(await client.get(key))]
        elif kind == "zset":
            values = await client.zrange(key, 0, -1)
        elif kind == "list":
            values = await client.lrange(key, 0, -1)
        elif kind == "hash":
            values = [f"{k}={v}" for k, v in (await client.hgetall(key)).items()]
        else:
            values = list(await client.smembers(key)) if kind == "set" else []
        found += any(WORD in value for value in values)
    return found


async def _case(
    name: str, repo: ChatRepository, root: Path, n: int, redis: RedisRepository | None
) -> tuple[list[Row], dict[str, Any]]:
    search = HistorySearch(repo, root)
    tasks = TaskSupervisor()
    forgetting = Forgetting(repo, search, tasks)
    planted = await _fill(repo, search, n)
    started = time.perf_counter()
    found = await forgetting.find(CHAT, WORD)
    listed = time.perf_counter() - started
    request = forgetting.ask(CHAT, WORD, found, 1)
    started = time.perf_counter()
    forgotten = await forgetting.confirm(request)
    count, facts = forgotten.messages, forgotten.facts
    confirmed = time.perf_counter() - started
    started = time.perf_counter()
    await search.rebuild(CHAT)
    rebuilt = time.perf_counter() - started
    hits = await search.search(CHAT, WORD, 50)
    await tasks.close()
    left = _files_holding(root)
    keys = await _keys_holding(redis) if redis is not None else None
    case = f"{name}, {n // 1000}k messages"
    rows = [
        row(BENCHMARK, case, "messages forgotten", count, target=f"= {FORGOTTEN}"),
        row(BENCHMARK, case, "find (the /forget listing)", round(listed, 3), "s"),
        row(
            BENCHMARK, case, "confirm: erase and rebuild", round(confirmed, 3), "s", target="< 30 s"
        ),
        row(BENCHMARK, case, "search index rebuild alone", round(rebuilt, 3), "s"),
        row(BENCHMARK, case, "files under DATA_DIR holding the word", left, target="= 0"),
        row(BENCHMARK, case, "search hits for the word", len(hits), target="= 0"),
    ]
    if keys is not None:
        rows.append(row(BENCHMARK, case, "Redis keys holding the word", keys, target="= 0"))
    raw = {"planted": planted, "found": list(found.seqs), "facts": facts}
    return rows, raw


async def run(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    n = QUICK_MESSAGES if quick else MESSAGES
    rows: list[Row] = []
    raw: dict[str, Any] = {"messages": n}
    with tempfile.TemporaryDirectory(prefix="membot-bench-forget-") as tmp:
        root = Path(tmp) / "files"
        repo = FileRepository(root)
        case_rows, raw["files"] = await _case("files", repo, root, n, None)
        rows += case_rows
    async with redis_scratch() as prefix:
        if prefix is not None:
            with tempfile.TemporaryDirectory(prefix="membot-bench-forget-") as tmp:
                redis = RedisRepository(create_client(REDIS_URL), prefix=prefix, max_messages=2 * n)
                try:
                    case_rows, raw["redis"] = await _case("redis", redis, Path(tmp), n, redis)
                finally:
                    await redis.close()
                rows += case_rows
    return rows, raw
