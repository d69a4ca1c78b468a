"""Archive search on a long chat: index build, query latency, catch-up, recall@5; and recall
per kind of question on the hard recall set (bench/search_recall.py).

A section like the others (`python -m bench --only search`); it always runs in full, `--quick`
or not: its figures are only comparable at full size.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.fakes.search_corpus import Conversation, generate_conversation, recall_at_k

from bench import search_recall
from bench.core import Row, row
from membot.ids import ConversationId
from membot.memory import FileRepository, Message
from membot.search import HistorySearch

BENCHMARK = "search_history"
CHAT_ID = ConversationId.telegram(100_500)
SMALL_CHAT_ID = ConversationId.telegram(100_501)
MESSAGES = 100_000
QUERIES = 200
APPENDED = 20
# A recall figure for the size the unit test checks, next to the one at full size.
SMALL_MESSAGES = 5_000


def _row(case: str, metric: str, value: float, unit: str, target: str) -> Row:
    return row(BENCHMARK, case, metric, round(value, 3), unit, target=target)


async def _store(repo: FileRepository, chat_id: ConversationId, conversation: Conversation) -> None:
    # Through the repository, so seqs, meta.json and the file format are the real ones;
    # big batches keep it to a few dozen fsyncs.
    step = 5_000
    for start in range(0, len(conversation.messages), step):
        await repo.append(chat_id, conversation.messages[start : start + step])


def _queries(conversation: Conversation, count: int) -> list[str]:
    """A mix of the planted questions and everyday words, which match thousands of messages."""
    rng = random.Random(7)
    everyday = [
        "car level",
        "book school",
        "report meeting",
        "машина ключ",
        "отчёт по работе",
        "билеты на поезд",
        "phone",
        "кофе",
        "what did we say about the budget",
        "дача кухня окно",
    ]
    planted = [probe.query for probe in conversation.probes]
    return [rng.choice(planted if i % 2 else everyday) for i in range(count)]


def _percentile(samples: list[float], pct: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))
    return ordered[index]


async def _recall(
    search: HistorySearch, chat_id: ConversationId, conversation: Conversation
) -> float:
    async def seqs(query: str, k: int) -> list[int]:
        return [hit.seq for hit in await search.search(chat_id, query, k)]

    recall, _ = await recall_at_k(seqs, conversation.probes, k=5)
    return recall


async def _run(root: Path) -> list[Row]:
    rows: list[Row] = []
    repo = FileRepository(root)
    search = HistorySearch(repo, root)
    case = f"{MESSAGES // 1000}k messages"
    try:
        conversation = generate_conversation(MESSAGES)
        await _store(repo, CHAT_ID, conversation)

        started = time.perf_counter()
        await search.search(CHAT_ID, "first search builds the index")
        build = time.perf_counter() - started
        rows.append(_row(case, "index build (first search)", build, "s", "< 15 s"))
        size = sum(p.stat().st_size for p in search.index_path(CHAT_ID).parent.glob("search*"))
        rows.append(_row(case, "index size", size / 2**20, "MiB", "-"))

        latencies = []
        for query in _queries(conversation, QUERIES):
            started = time.perf_counter()
            await search.search(CHAT_ID, query, 5)
            latencies.append((time.perf_counter() - started) * 1000)
        rows.append(_row(case, "query latency p50", statistics.median(latencies), "ms", "-"))
        rows.append(_row(case, "query latency p99", _percentile(latencies, 99), "ms", "< 50 ms"))
        # The same queries within a period (since/until, as search_history passes them): a
        # random stretch of the chat, from a day to its whole length.
        first, last = conversation.messages[0].ts, conversation.messages[-1].ts
        rng = random.Random(11)
        latencies = []
        for query in _queries(conversation, QUERIES):
            since = first + (last - first) * rng.random()
            until = since + max((last - since) * rng.random(), timedelta(days=1))
            started = time.perf_counter()
            await search.search(CHAT_ID, query, 5, since=since, until=until)
            latencies.append((time.perf_counter() - started) * 1000)
        p99 = _percentile(latencies, 99)
        rows.append(_row(case, "query latency p99, within a period", p99, "ms", "< 50 ms"))

        fresh = [
            Message(role="user" if i % 2 == 0 else "assistant", content=f"new message {i}")
            for i in range(APPENDED)
        ]
        await repo.append(CHAT_ID, fresh)
        started = time.perf_counter()
        hits = await search.search(CHAT_ID, f"new message {APPENDED - 1}", 1)
        catch_up = (time.perf_counter() - started) * 1000
        if not hits or hits[0].content != f"new message {APPENDED - 1}":
            raise AssertionError("the appended messages were not indexed")
        rows.append(_row(case, f"search after {APPENDED} new messages", catch_up, "ms", "< 100 ms"))

        recall = await _recall(search, CHAT_ID, conversation)
        rows.append(_row(case, "recall@5 (planted facts)", recall, "ratio", ">= 0.9"))

        small = generate_conversation(SMALL_MESSAGES)
        await _store(repo, SMALL_CHAT_ID, small)
        recall = await _recall(search, SMALL_CHAT_ID, small)
        small_case = f"{SMALL_MESSAGES // 1000}k messages"
        rows.append(_row(small_case, "recall@5 (planted facts)", recall, "ratio", ">= 0.9"))
        rows += await search_recall.rows(root / "recall", _row)
    finally:
        await repo.close()
    return rows


async def run(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="membot-bench-search-") as tmp:
        rows = await _run(Path(tmp))
    return rows, {"messages": MESSAGES, "queries": QUERIES, "small_messages": SMALL_MESSAGES}
