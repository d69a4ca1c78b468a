"""Many stored chats: does membot slow down, or grow, with the number of conversations it
keeps? 10,000 chats of 20 messages each are stored (in DATA_DIR, and in Redis), then
`membot run` is started and 500 of them become active (a message each, all at once, with a
zero-latency model). Against a fresh store, in the same run: the time from `exec` to the
first `getUpdates`, the answers' p50/p99, and the process's peak RSS. Target: no growth.
"""

from __future__ import annotations

import asyncio
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
    from membot.memory.redis import RedisRepository, create_client

    chats, active = (1000, 100) if quick else (10_000, 500)
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="membot-bench-stored-") as tmp:
        root = Path(tmp)
        filled = time.perf_counter()
        await _fill(FileRepository(root / "stored" / "data"), chats)
        prefix = f"membot-bench-stored:{uuid.uuid4().hex}:"
        client = create_client(REDIS_URL)
        repo = RedisRepository(client, prefix=prefix)
        try:
            await _fill(repo, chats)
            raw["fill_seconds"] = round(time.perf_counter() - filled, 1)
            fresh_prefix = f"membot-bench-fresh:{uuid.uuid4().hex}:"
            cases = {
                ("files", "fresh"): ({}, root / "fresh" / "data"),
                ("files", f"{chats} stored"): ({}, root / "stored" / "data"),
                ("redis", "fresh"): (
                    {"storage": "redis", "redis_url": REDIS_URL, "redis_prefix": fresh_prefix},
                    root / "fresh-redis" / "data",
                ),
                ("redis", f"{chats} stored"): (
                    {"storage": "redis", "redis_url": REDIS_URL, "redis_prefix": prefix},
                    root / "stored-redis" / "data",
                ),
            }
            results: dict[tuple[str, str], tuple[float, RunStats, float]] = {}
            for key, (extra, data_dir) in cases.items():
                data_dir.mkdir(parents=True, exist_ok=True)
                results[key] = await _measure(extra, data_dir, active)
        finally:
            for p in (prefix, fresh_prefix):
                keys = [k async for k in client.scan_iter(match=f"{p}*")]
                for start in range(0, len(keys), 1000):
                    await client.delete(*keys[start : start + 1000])
            await repo.close()
    for (backend, state), (ready, stats, rss) in results.items():
        case = f"{backend}, {state}"
        raw[case] = {**stats.to_dict(), "ready_s": round(ready, 3), "peak_rss_mib": round(rss, 1)}
        note = f"{active} chats active at once, 1 message each, zero-latency model"
        rows.append(row(BENCH, case, "exec to first getUpdates", round(ready, 2), "s", note=note))
        rows.append(row(BENCH, case, "answer p50", round(stats.p50_ms, 1), "ms"))
        rows.append(row(BENCH, case, "answer p99", round(stats.p99_ms, 1), "ms"))
        rows.append(row(BENCH, case, "peak RSS", round(rss, 1), "MiB"))
    for backend in ("files", "redis"):
        fresh = results[(backend, "fresh")]
        stored = results[(backend, f"{chats} stored")]
        for metric, index in (("start-up", 0), ("peak RSS", 2)):
            ratio = stored[index] / fresh[index]
            rows.append(
                row(
                    BENCH,
                    f"{backend}: stored / fresh",
                    metric,
                    round(ratio, 2),
                    "x",
                    target="<= 1.1",
                    ok=ratio <= 1.1,
                )
            )
        ratio = stored[1].p50_ms / fresh[1].p50_ms
        rows.append(
            row(
                BENCH,
                f"{backend}: stored / fresh",
                "answer p50",
                round(ratio, 2),
                "x",
                target="<= 1.1",
                ok=ratio <= 1.1,
            )
        )
    return rows, raw
