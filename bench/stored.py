"""Many stored chats: does membot slow down, or grow, with the number of conversations it
keeps? 10,000 chats of 20 messages each are stored (in DATA_DIR, and in Redis), then
`membot run` is started and 500 of them become active (a message each, all at once, with a
zero-latency model). Against a fresh store, in the same run: the time from `exec` to the
first `getUpdates`, the answers' p50/p99, and the process's peak RSS (medians of 3 runs in
alternating order). Target: no growth.

An empty store is not a fair reference for the answers: a stored chat's first answer reads
its 20 messages, a fresh chat has none. So the answers are also measured in a store that
holds only the 500 chats that speak, with the same history: 10,000 stored against those 500
alone is what the number of stored chats costs.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.core import (
    REDIS_URL,
    Row,
    RunStats,
    drive,
    fakes,
    peak_rss_mib,
    process_env,
    row,
)

BENCH = "stored"
FIRST_CHAT = 6_000_001
PER_CHAT = 20


async def _fill(repo: Any, chats: int) -> None:
    """Store `chats` conversations of PER_CHAT messages, from FIRST_CHAT on (the active
    ones are the first, so a store filled with the active count holds exactly them)."""
    from membot.ids import ConversationId
    from membot.memory import Message

    async def one(chat: int) -> None:
        lines = [
            Message(role="user" if i % 2 == 0 else "assistant", content=f"stored message {i}")
            for i in range(PER_CHAT)
        ]
        await repo.append(ConversationId.telegram(chat), lines)

    for start in range(0, chats, 200):
        await asyncio.gather(*(one(FIRST_CHAT + n) for n in range(start, min(start + 200, chats))))


async def _measure(
    extra: dict[str, str], data_dir: Path, active: int
) -> tuple[float, RunStats, float]:
    async with fakes() as (tg, llm):
        env = process_env(tg, llm.base_url, data_dir=data_dir, **extra)
        polls = tg.call_count("getUpdates")
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "membot",
            "run",
            cwd=data_dir.parent,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            await tg.wait_for_call("getUpdates", timeout=60, count=polls + 1)
            ready = time.perf_counter() - started
            stats = await drive(tg, list(range(FIRST_CHAT, FIRST_CHAT + active)), 1, "active")
            rss = peak_rss_mib(proc.pid)
        finally:
            proc.terminate()
            await proc.wait()
    return ready, stats, rss


async def run(quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    from membot.memory import FileRepository
    from membot.memory.redis import RedisRepository
    from membot.redis.client import create_client

    chats, active = (1000, 100) if quick else (10_000, 500)
    rounds = 1 if quick else 3
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="membot-bench-stored-") as tmp:
        root = Path(tmp)
        filled = time.perf_counter()
        await _fill(FileRepository(root / "stored" / "data"), chats)
        await _fill(FileRepository(root / "alone" / "data"), active)
        prefix = f"membot-bench-stored:{uuid.uuid4().hex}:"
        client = create_client(REDIS_URL)
        repo = RedisRepository(client, prefix=prefix)
        alone_prefix = f"membot-bench-alone:{uuid.uuid4().hex}:"
        alone_repo = RedisRepository(client, prefix=alone_prefix)
        fresh_prefix = f"membot-bench-fresh:{uuid.uuid4().hex}:"
        try:
            await _fill(repo, chats)
            await _fill(alone_repo, active)
            raw["fill_seconds"] = round(time.perf_counter() - filled, 1)
            cases = {
                ("files", "fresh"): ({}, root / "fresh" / "data"),
                ("files", f"{active} alone"): ({}, root / "alone" / "data"),
                ("files", f"{chats} stored"): ({}, root / "stored" / "data"),
                ("redis", "fresh"): (
                    {"storage": "redis", "redis_url": REDIS_URL, "redis_prefix": fresh_prefix},
                    root / "fresh-redis" / "data",
                ),
                ("redis", f"{active} alone"): (
                    {"storage": "redis", "redis_url": REDIS_URL, "redis_prefix": alone_prefix},
                    root / "alone-redis" / "data",
                ),
                ("redis", f"{chats} stored"): (
                    {"storage": "redis", "redis_url": REDIS_URL, "redis_prefix": prefix},
                    root / "stored-redis" / "data",
                ),
            }
            runs: dict[tuple[str, str], list[dict[str, float]]] = {key: [] for key in cases}
            for data_dir in (d for _, d in cases.values()):
                data_dir.mkdir(parents=True, exist_ok=True)
            # Rounds in alternating order, medians: one run of 500 answers at once on two
            # shared cores varies by a third from run to run.
            for n in range(rounds):
                order = list(cases.items())
                for key, (extra, data_dir) in order if n % 2 == 0 else reversed(order):
                    if key[1] == "fresh":
                        # Empty in every round: a run leaves its 500 chats behind. The stored
                        # and alone ones both grow by one exchange a chat per round, alike.
                        data_dir = data_dir.with_name(f"data-{n}")
                        data_dir.mkdir()
                        if "redis_prefix" in extra:
                            extra = {**extra, "redis_prefix": f"{fresh_prefix}{n}:"}
                    ready, stats, rss = await _measure(extra, data_dir, active)
                    runs[key].append(
                        {
                            **stats.to_dict(),
                            "ready_s": round(ready, 3),
                            "peak_rss_mib": round(rss, 1),
                        }
                    )
        finally:
            for p in (prefix, alone_prefix, fresh_prefix):
                keys = [k async for k in client.scan_iter(match=f"{p}*")]
                for start in range(0, len(keys), 1000):
                    await client.delete(*keys[start : start + 1000])
            await repo.close()  # closes the client both repositories share
    medians = {
        key: {m: statistics.median(r[m] for r in samples) for m in samples[0]}
        for key, samples in runs.items()
    }
    note = (
        f"{active} chats active at once, 1 message each, zero-latency model; "
        f"median of {rounds} alternating runs"
    )
    for (backend, state), figures in medians.items():
        case = f"{backend}, {state}"
        raw[case] = runs[(backend, state)]
        ready = figures["ready_s"]
        rows.append(row(BENCH, case, "exec to first getUpdates", round(ready, 2), "s", note=note))
        rows.append(row(BENCH, case, "answer p50", round(figures["p50_ms"], 1), "ms"))
        rows.append(row(BENCH, case, "answer p99", round(figures["p99_ms"], 1), "ms"))
        rows.append(row(BENCH, case, "peak RSS", round(figures["peak_rss_mib"], 1), "MiB"))
    comparisons = (
        ("stored / fresh", "fresh", "ready_s", "start-up", True),
        ("stored / fresh", "fresh", "peak_rss_mib", "peak RSS", True),
        ("stored / fresh", "fresh", "p50_ms", "answer p50", False),
        (f"stored / {active} alone", f"{active} alone", "p50_ms", "answer p50", True),
    )
    for backend in ("files", "redis"):
        stored = medians[(backend, f"{chats} stored")]
        for name, reference, measure, metric, judged in comparisons:
            ratio = stored[measure] / medians[(backend, reference)][measure]
            rows.append(
                row(
                    BENCH,
                    f"{backend}: {name}",
                    metric,
                    round(ratio, 2),
                    "x",
                    target="<= 1.1" if judged else "",
                    ok=ratio <= 1.1 if judged else None,
                )
            )
    return rows, raw
