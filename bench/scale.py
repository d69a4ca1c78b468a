"""Realistic scale: 1,000 chats, 3 messages each, a model that takes 2 s per answer, against
membot (`membot run`, files) and the durable floor (bench/floor.py), each as its own process.

Every chat sends its messages one after another (each waits for its answer), all chats at
once, so up to 1,000 turns are in flight. Reported: whether every message was answered, the
p50 / p99 from update to answer, and each process's peak RSS (VmHWM). Telegram's pacing is
raised for both (the floor has none, and 30 messages a second for the bot would be all a
comparison measured); the model's 2 s is the realistic part.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.core import (
    Row,
    RunStats,
    drive,
    fakes,
    peak_rss_mib,
    process_env,
    row,
)

BENCH = "scale"
LATENCY = 2.0
TARGET_P99 = 1.2  # membot's p99 at most this times the durable floor's


async def _measure(bot: str, chats: int, per_chat: int) -> tuple[RunStats, float]:
    async with fakes(latency=LATENCY) as (tg, llm):
        with tempfile.TemporaryDirectory(prefix="membot-bench-scale-") as tmp:
            env = process_env(tg, llm.base_url, data_dir=Path(tmp) / "data", llm_timeout=60)
            if bot == "membot":
                args = [sys.executable, "-m", "membot", "run"]
            else:
                args = [sys.executable, "-m", "bench.floor", "--durable", str(Path(tmp) / "floor")]
            polls = tg.call_count("getUpdates")
            proc = await asyncio.create_subprocess_exec(
                *args,
                cwd=Path(__file__).resolve().parents[1],
                env=env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            try:
                await tg.wait_for_call("getUpdates", timeout=60, count=polls + 1)
                ids = list(range(7_000_001, 7_000_001 + chats))
                stats = await drive(tg, ids, per_chat, bot, count_missing=True)
                rss = peak_rss_mib(proc.pid)
            finally:
                proc.terminate()
                await proc.wait()
    return stats, rss


async def run(quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    chats, per_chat = (200, 2) if quick else (1000, 3)
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    measured: dict[str, list[tuple[RunStats, float]]] = {"durable floor": [], "membot": []}
    started = time.perf_counter()
    for _ in range(1 if quick else 2):  # A B A B
        for bot in measured:
            measured[bot].append(await _measure(bot, chats, per_chat))
    note = f"{chats} chats x {per_chat}, model {LATENCY:g} s, each bot its own process"
    p99: dict[str, float] = {}
    for bot, runs in measured.items():
        raw[bot] = [{**s.to_dict(), "peak_rss_mib": round(r, 1)} for s, r in runs]
        best = min(runs, key=lambda m: m[0].p99_ms)  # the quieter of the runs
        p99[bot] = best[0].p99_ms
        answered = min(s.messages for s, _ in runs)
        total = chats * per_chat
        rows.append(
            row(
                BENCH,
                bot,
                "answered",
                answered,
                "msgs",
                target=f">= {total}",
                ok=answered >= total,
                note=note,
            )
        )
        rows.append(row(BENCH, bot, "p50", round(best[0].p50_ms), "ms"))
        rows.append(row(BENCH, bot, "p99", round(best[0].p99_ms), "ms"))
        rows.append(row(BENCH, bot, "peak RSS", round(max(r for _, r in runs), 1), "MiB"))
    ratio = p99["membot"] / p99["durable floor"]
    rows.append(
        row(
            BENCH,
            "membot vs durable floor",
            "p99 ratio",
            round(ratio, 3),
            "x",
            target=f"<= {TARGET_P99}",
            ok=ratio <= TARGET_P99,
        )
    )
    raw["seconds"] = round(time.perf_counter() - started, 1)
    return rows, raw
