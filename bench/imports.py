"""/import of a ChatGPT export: time, memory, and search over the chat afterwards.

The export is ChatGPT's ZIP in its real format (tests/fakes/exports.py): 50,000 messages in
1,000 conversations of 50, every tenth with a regenerated answer left on an abandoned branch,
the text from the search corpus (tests/fakes/search_corpus.py, a seed of its own). It is
imported into a chat of 100,000 messages of its own (the search section's size) by the
importer the bot uses, over the file backend, in a process of its own (bench/import_run.py:
the time, and how far the process's peak RSS rose), then once more (nothing new: every origin
known). Then the chat is searched, its first search indexing the imported messages, and its
query latency compared with two others: the same chat without the import (its 100,000
messages alone), and the same 150,000 messages all the chat's own (the export's text appended
as ordinary messages): what the import costs search beyond the number of its messages. The
chats are searched in turns, query by query, so a noisy moment of the machine falls on all.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from tests.fakes.exports import Chat, Turn, chatgpt_zip
from tests.fakes.search_corpus import Conversation, generate_conversation

from bench.core import Row, row
from membot.ids import ConversationId
from membot.memory import FileRepository
from membot.search import HistorySearch

BENCHMARK = "imports"
OWN = 100_000
IMPORTED = 50_000
PER_CONVERSATION = 50
QUERIES = 200
WITH = ConversationId.telegram(300_001)
WITHOUT = ConversationId.telegram(300_002)
AS_OWN = ConversationId.telegram(300_003)
CASE = f"{IMPORTED // 1000}k-message ChatGPT export"
EVERYDAY = ["car level", "book school", "report meeting", "машина ключ", "phone", "кофе"]


def _row(case: str, metric: str, value: float, unit: str, target: str = "") -> Row:
    return row(BENCHMARK, case, metric, round(value, 3), unit, target=target)


def _export(corpus: Conversation) -> bytes:
    chats = []
    messages = corpus.messages
    for n, start in enumerate(range(0, len(messages), PER_CONVERSATION)):
        part = messages[start : start + PER_CONVERSATION]
        turns = [Turn(m.role, m.content, m.ts) for m in part]
        abandoned = {3: [Turn("assistant", "an answer regenerated since", part[3].ts)]}
        chats.append(
            Chat(f"conv-{n}", f"Conversation {n}", turns, abandoned if n % 10 == 0 else {})
        )
    return chatgpt_zip(chats)


async def _imported(data_dir: Path, export: Path) -> dict[str, Any]:
    child = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bench.import_run", str(data_dir), str(WITH.chat_id)),
        *(str(export), "200"),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"bench.import_run exited with {child.returncode}")
    result: dict[str, Any] = json.loads(out)
    return result


def _queries(own: Conversation, imported: Conversation) -> list[str]:
    rng = random.Random(5)
    planted = [p.query for p in own.probes] + [p.query for p in imported.probes]
    return [rng.choice(planted + EVERYDAY) for _ in range(QUERIES)]


def _json_size(export: Path) -> int:
    with zipfile.ZipFile(export) as archive:
        return archive.getinfo("conversations.json").file_size


def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98]


async def _run(root: Path) -> tuple[list[Row], dict[str, Any]]:
    data_dir = root / "data"
    own = generate_conversation(OWN)
    corpus = generate_conversation(IMPORTED, seed=20240101)
    export = root / "chatgpt-export.zip"
    export.write_bytes(_export(corpus))
    repo = FileRepository(data_dir)
    for cid in (WITH, WITHOUT, AS_OWN):
        for start in range(0, OWN, 5_000):
            await repo.append(cid, own.messages[start : start + 5_000])
    for start in range(0, IMPORTED, 5_000):
        await repo.append(AS_OWN, corpus.messages[start : start + 5_000])
    search = HistorySearch(repo, root / "index")
    for cid in (WITH, WITHOUT, AS_OWN):  # indexed before, as a chat in use is
        await search.search(cid, "first search builds the index")
    await repo.close()

    first = await _imported(data_dir, export)
    again = await _imported(data_dir, export)
    if first["messages"] != IMPORTED or again["messages"]:
        raise AssertionError(f"imported {first['messages']}, then {again['messages']}")
    rows = [
        _row(CASE, "export size (ZIP)", export.stat().st_size / 2**20, "MiB"),
        _row(CASE, "conversations.json size", _json_size(export) / 2**20, "MiB"),
        _row(CASE, "import time", first["seconds"], "s", "< 60 s"),
        _row(CASE, "peak RSS added", first["peak_mb"], "MB", "< 1000 MB"),
        _row(CASE, "import again (nothing new)", again["seconds"], "s", "< 30 s"),
    ]

    repo = FileRepository(data_dir)
    search = HistorySearch(repo, root / "index")
    try:
        started = time.perf_counter()
        await search.search(WITH, "first search indexes the import")
        took = time.perf_counter() - started
        rows.append(_row(CASE, "first search after it (indexes the import)", took, "s"))
        latencies: dict[ConversationId, list[float]] = {WITH: [], WITHOUT: [], AS_OWN: []}
        for query in _queries(own, corpus):
            for cid, samples in latencies.items():
                started = time.perf_counter()
                await search.search(cid, query, 5)
                samples.append((time.perf_counter() - started) * 1000)
        p99 = {cid: _p99(samples) for cid, samples in latencies.items()}
        rows.append(_row(CASE, "search p99, the chat without it", p99[WITHOUT], "ms"))
        rows.append(_row(CASE, "search p99, the chat with it", p99[WITH], "ms"))
        rows.append(_row(CASE, "search p99, its text as the chat's own", p99[AS_OWN], "ms"))
        ratio = p99[WITH] / p99[WITHOUT]
        rows.append(_row(CASE, "search p99 with / without", ratio, "x", "<= 1.2"))
        ratio = p99[WITH] / p99[AS_OWN]
        rows.append(_row(CASE, "search p99 imported / as own", ratio, "x", "<= 1.2"))
    finally:
        await repo.close()
    raw = {"own": OWN, "imported": IMPORTED, "queries": QUERIES, "first": first, "again": again}
    return rows, raw


async def run(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="membot-bench-import-") as tmp:
        return await _run(Path(tmp))
