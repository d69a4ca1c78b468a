"""Overhead per message: membot vs the floor relay (bench/floor.py), zero-latency fakes.

"1 chat": one chat sends its messages one after another, each waiting for its answer.
"40 chats": 40 chats do that at the same time (so up to 40 updates are in flight).
Throughput = answers / wall time of the run; latency = update pushed -> sendMessage received.

Both bots run in the same process, each against its own fake Telegram (two pollers of one
token would conflict) and a shared zero-latency fake LLM. membot runs with its defaults
(window 20, every built-in tool declared, summaries every 20 messages, typing indicator,
Markdown rendering, fsync'd files in a temporary DATA_DIR). Runs alternate between the two
bots (floor first in even rounds, membot first in odd ones) so machine drift hits both alike;
each figure is the median over the rounds, and the ratio is of those medians.

The fakes share the bots' CPU (one event loop): their cost is in both bots' figures, which
makes the ratio somewhat kinder to the slower bot than a separate-process setup would be.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core import (
    BotApp,
    Row,
    RunStats,
    TimedTelegram,
    drive,
    fakes,
    make_floor,
    make_membot,
    median,
    row,
    running,
)

BENCH = "overhead"
TARGET_RATIO = 0.8
CONCURRENCY = (1, 40)
BOTS = ("floor", "membot")


@dataclass(frozen=True, slots=True)
class Plan:
    rounds: int
    per_chat: dict[int, int]  # concurrency -> messages per chat in one run
    warmup_per_chat: int


FULL = Plan(rounds=5, per_chat={1: 150, 40: 8}, warmup_per_chat=3)
QUICK = Plan(rounds=2, per_chat={1: 30, 40: 2}, warmup_per_chat=1)


def _chats(concurrency: int) -> list[int]:
    # 1-chat runs use chat 1, 40-chat runs chats 1001..1040 (positive ids: private chats).
    base = 1 if concurrency == 1 else 1001
    return [base + i for i in range(concurrency)]


async def run(quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    plan = QUICK if quick else FULL
    results: dict[str, dict[int, list[RunStats]]] = {
        name: {c: [] for c in CONCURRENCY} for name in BOTS
    }
    with tempfile.TemporaryDirectory(prefix="membot-bench-") as tmp:
        async with fakes() as (tg_membot, llm), TimedTelegram() as tg_floor:
            bots: dict[str, tuple[BotApp, TimedTelegram]] = {
                "membot": (make_membot(tg_membot, llm, Path(tmp) / "data"), tg_membot),
                "floor": (make_floor(tg_floor, llm), tg_floor),
            }
            async with (
                running(bots["membot"][0], tg_membot),
                running(bots["floor"][0], tg_floor),
            ):
                # Warm-up: connections, lazily built models, every chat's directory.
                for _, tg in bots.values():
                    for c in CONCURRENCY:
                        await drive(tg, _chats(c), plan.warmup_per_chat, "warmup")
                for round_no in range(plan.rounds):
                    order = BOTS if round_no % 2 == 0 else BOTS[::-1]
                    for c in CONCURRENCY:
                        for name in order:
                            stats = await drive(
                                bots[name][1], _chats(c), plan.per_chat[c], f"r{round_no}"
                            )
                            results[name][c].append(stats)
    raw = {
        name: {str(c): [s.to_dict() for s in runs] for c, runs in per_c.items()}
        for name, per_c in results.items()
    }
    return _rows(results, plan), raw


def _rows(results: dict[str, dict[int, list[RunStats]]], plan: Plan) -> list[Row]:
    rows: list[Row] = []
    for c in CONCURRENCY:
        case = f"{c} chat{'s' if c > 1 else ''}"
        answers = c * plan.per_chat[c]
        note = (
            f"{case}: median of {plan.rounds} runs of {answers} answers "
            f"({plan.per_chat[c]} per chat, one at a time)"
        )
        throughput: dict[str, float] = {}
        for name in BOTS:
            runs = results[name][c]
            throughput[name] = median([s.throughput for s in runs])
            figures = (
                ("throughput", throughput[name], "msg/s"),
                ("latency p50", median([s.p50_ms for s in runs]), "ms"),
                ("latency p99", median([s.p99_ms for s in runs]), "ms"),
            )
            for metric, value, unit in figures:
                rows.append(row(BENCH, f"{case}, {name}", metric, value, unit, note=note))
        ratio = throughput["membot"] / throughput["floor"]
        rows.append(
            row(
                BENCH,
                case,
                "throughput membot/floor",
                ratio,
                "x",
                target=f">= {TARGET_RATIO}",
                ok=ratio >= TARGET_RATIO,
                note=note,
            )
        )
    return rows
