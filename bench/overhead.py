"""Overhead per message: membot vs the floor relay (bench/floor.py), zero-latency fakes.

"1 chat": one chat sends its messages one after another, each waiting for its answer.
"40 chats": 40 chats do that at the same time (so up to 40 updates are in flight).
"1 chat, 200 ms model": one chat again, with a model that takes 200 ms per answer, as a fast
real one does (informational: how much later a user gets an answer because of membot).
Throughput = answers / wall time of the run; latency = update pushed -> sendMessage received;
CPU per message = the process's CPU time over the run / answers (bot and fakes together: the
difference between the two bots is what membot adds, fakes' extra work for it included).

Both bots run in the same process, each against its own fake Telegram (two pollers of one
token would conflict) and a shared zero-latency fake LLM. membot runs with its defaults
(window 20, every built-in tool declared, summaries every 20 messages, typing indicator,
Markdown rendering, fsync'd files in a temporary DATA_DIR). The bots take turns in every
round, the order rotating, so machine drift hits them alike; each figure is the median over
the rounds, and each ratio (and CPU difference) the median of the rounds' own ratios, so that
a machine whose speed drifts during the run compares runs made next to each other.

The fakes share the bots' CPU (one event loop): their cost is in both bots' figures, which
makes the ratio somewhat kinder to the slower bot than a separate-process setup would be.
Between runs the fakes forget what they recorded (`_shed`), so the heap does not grow with
the bench and no bot pays the collector for the bodies of another's requests.

"membot (redis)" is a third bot, membot with the same defaults on STORAGE=redis (the local
Redis, under a prefix of this run's own, deleted afterwards), in the zero-latency cases only:
its throughput beside the file backend's, as "throughput redis/files". The three bots take
turns in every round (the order rotating), as the two do. Its CPU per message leaves out the
Redis server's own (another process). Skipped when Redis is unreachable.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fakes import FakeLLM

from bench.core import (
    BotApp,
    Row,
    RunStats,
    TimedTelegram,
    drive,
    fakes,
    make_durable_floor,
    make_floor,
    make_membot,
    median,
    redis_scratch,
    redis_settings,
    row,
    running,
)

BENCH = "overhead"
REDIS = "membot (redis)"
DURABLE = "durable floor"
# The target: membot at least 1.2x the durable floor's throughput. membot/bare floor is
# informational: every part of that gap is a promise membot keeps.
TARGET_DURABLE = 1.2
BOTS = ("floor", DURABLE, "membot", REDIS)


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    concurrency: int
    latency: float  # the model's seconds per answer
    judged: bool  # the target applies (zero-latency cases)

    @property
    def chats(self) -> list[int]:
        # Positive ids (private chats); each case has its own, so each has its own history.
        base = {1: 1, 40: 1001}.get(self.concurrency, 5001) if not self.latency else 3001
        return [base + i for i in range(self.concurrency)]


CASES = (
    Case("1 chat", 1, 0.0, judged=True),
    Case("40 chats", 40, 0.0, judged=True),
    Case("1 chat, 200 ms model", 1, 0.2, judged=False),
)


@dataclass(frozen=True, slots=True)
class Plan:
    rounds: int
    per_chat: dict[str, int]  # case -> messages per chat in one run
    warmup_per_chat: int


# Seven rounds, 250 answers a round at 1 chat: with five of 150 the 1-chat ratio's median
# moved 1.05-1.25x between two runs on one machine (rounds 0.89-1.34x), half a minute apart.
FULL = Plan(
    rounds=7,
    per_chat={"1 chat": 250, "40 chats": 8, "1 chat, 200 ms model": 10},
    warmup_per_chat=3,
)
QUICK = Plan(
    rounds=2,
    per_chat={"1 chat": 30, "40 chats": 2, "1 chat, 200 ms model": 3},
    warmup_per_chat=1,
)


@dataclass(slots=True)
class Measured:
    stats: RunStats
    cpu_ms: float  # process CPU per answer


async def run(quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    plan = QUICK if quick else FULL
    results: dict[str, dict[str, list[Measured]]] = {
        name: {case.name: [] for case in CASES} for name in BOTS
    }
    with tempfile.TemporaryDirectory(prefix="membot-bench-") as tmp:
        async with (
            redis_scratch() as prefix,
            fakes() as (tg_membot, llm),
            TimedTelegram() as tg_floor,
            TimedTelegram() as tg_redis,
            TimedTelegram() as tg_durable,
        ):
            bots: dict[str, tuple[BotApp, TimedTelegram]] = {
                "membot": (make_membot(tg_membot, llm, Path(tmp) / "data"), tg_membot),
                "floor": (make_floor(tg_floor, llm), tg_floor),
                DURABLE: (make_durable_floor(tg_durable, llm, Path(tmp) / "durable"), tg_durable),
            }
            if prefix is not None:
                redis_bot = make_membot(
                    tg_redis, llm, Path(tmp) / "redis-data", **redis_settings(prefix)
                )
                bots[REDIS] = (redis_bot, tg_redis)
            async with contextlib.AsyncExitStack() as stack:
                for app, tg in bots.values():
                    await stack.enter_async_context(running(app, tg))
                # Warm-up: connections, lazily built models, every chat's directory.
                for name, (_, tg) in bots.items():
                    for case in CASES:
                        if _runs(name, case):
                            llm.latency = case.latency
                            await drive(tg, case.chats, plan.warmup_per_chat, "warmup")
                _shed(llm, [tg for _, tg in bots.values()])
                for round_no in range(plan.rounds):
                    shift = round_no % len(BOTS)
                    order = [n for n in BOTS[shift:] + BOTS[:shift] if n in bots]
                    for case in CASES:
                        llm.latency = case.latency
                        for name in order:
                            if not _runs(name, case):
                                continue
                            cpu = time.process_time()
                            stats = await drive(
                                bots[name][1],
                                case.chats,
                                plan.per_chat[case.name],
                                f"r{round_no}",
                            )
                            cpu_ms = (time.process_time() - cpu) * 1000 / stats.messages
                            results[name][case.name].append(Measured(stats, cpu_ms))
                            _shed(llm, [tg for _, tg in bots.values()])
    raw = {
        name: {
            case: [{**m.stats.to_dict(), "cpu_ms_per_msg": round(m.cpu_ms, 3)} for m in runs]
            for case, runs in per_case.items()
            if runs
        }
        for name, per_case in results.items()
    }
    return _rows(results, plan), raw


def _shed(llm: FakeLLM, telegrams: list[TimedTelegram]) -> None:
    """The fakes forget what they recorded (the bench reads only its own timestamps): kept,
    every request body of the run stays in the heap, and the collector's full passes over it
    (4.9 s of a 57 s run, 100 ms each) land on whichever bot runs next, the one whose
    requests carry tool schemas and a summary most of all."""
    llm.clear_records()
    for tg in telegrams:
        tg.clear_records()


def _paired_ratio(runs: list[Measured], reference: list[Measured]) -> float:
    """The median of each round's throughput ratio. A round's runs are adjacent in time, so
    a machine that speeds up or slows down during the bench (seen here: 2x over five rounds)
    cancels out; a ratio of the two medians would compare runs from different rounds."""
    pairs = zip(runs, reference, strict=True)
    return median([a.stats.throughput / b.stats.throughput for a, b in pairs])


def _paired_added(runs: list[Measured], reference: list[Measured]) -> float:
    """The median of each round's difference in CPU per message (see _paired_ratio)."""
    return median([a.cpu_ms - b.cpu_ms for a, b in zip(runs, reference, strict=True)])


def _runs(name: str, case: Case) -> bool:
    """The Redis bot runs the judged (zero-latency) cases only."""
    return name != REDIS or not case.latency


def _rows(results: dict[str, dict[str, list[Measured]]], plan: Plan) -> list[Row]:
    rows: list[Row] = []
    for case in CASES:
        per_chat = plan.per_chat[case.name]
        answers = case.concurrency * per_chat
        note = (
            f"{case.name}: median of {plan.rounds} runs of {answers} answers "
            f"({per_chat} per chat, one at a time)"
        )
        throughput: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for name in BOTS:
            runs = results[name][case.name]
            if not runs:
                continue
            throughput[name] = median([m.stats.throughput for m in runs])
            cpu[name] = median([m.cpu_ms for m in runs])
            figures = [
                ("throughput", throughput[name], "msg/s"),
                ("latency p50", median([m.stats.p50_ms for m in runs]), "ms"),
                ("latency p99", median([m.stats.p99_ms for m in runs]), "ms"),
            ]
            if not case.latency:
                # With a slow model, idle time (timers, polling) dilutes it into noise.
                figures.append(("CPU per message", cpu[name], "ms"))
            for metric, value, unit in figures:
                rows.append(row(BENCH, f"{case.name}, {name}", metric, value, unit, note=note))
        runs_of = {name: results[name][case.name] for name in throughput}
        ratio = _paired_ratio(runs_of["membot"], runs_of["floor"])
        if not case.latency:
            added = _paired_added(runs_of["membot"], runs_of["floor"])
            rows.append(row(BENCH, case.name, "CPU added by membot", added, "ms", note=note))
        if DURABLE in throughput:
            durable = _paired_ratio(runs_of["membot"], runs_of[DURABLE])
            if not case.latency:
                added = _paired_added(runs_of["membot"], runs_of[DURABLE])
                rows.append(
                    row(BENCH, case.name, "CPU added beyond the durable floor", added, "ms")
                )
            rows.append(
                row(
                    BENCH,
                    case.name,
                    "throughput membot/durable floor",
                    durable,
                    "x",
                    target=f">= {TARGET_DURABLE}" if case.judged else "",
                    ok=durable >= TARGET_DURABLE if case.judged else None,
                    note=note,
                )
            )
        rows.append(
            row(
                BENCH,
                case.name,
                "throughput membot/floor",
                ratio,
                "x",
                note=note,
            )
        )
        if REDIS in throughput:
            rows.append(
                row(
                    BENCH,
                    case.name,
                    "throughput redis/files",
                    _paired_ratio(runs_of[REDIS], runs_of["membot"]),
                    "x",
                    note="membot on STORAGE=redis over membot on files, same rounds",
                )
            )
    return rows
