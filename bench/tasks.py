"""Tasks in time: what 100,000 pending tasks cost a `membot run` process, and how soon 1,000
tasks due in the same second reach their chats. Files (QUEUE=local: the journal) and Redis
(QUEUE=redis: the stream, on a redis-server of the bench's own) side by side.

Pending: 100,000 tasks over 10,000 chats, due a month on (none fires), written through the
store backends themselves (bench/tasks_data.py). Each process is started against that store
and against the same set-up without them, in alternating order, and measured: the time from
`exec` to its first `getUpdates` (ready, as bench/startup.py), its resident memory (VmRSS)
then and once its due index is built (a task due at start, in a chat of its own, in both
stores: its message at the fake Telegram says the index is built), and its CPU per second
over a window after that while nothing is due (its threads' run time, from /proc). Medians of
the rounds; each ratio, with tasks against without, the median of the rounds' own.

Due: 1,000 tasks in 1,000 chats of the same store, all due at one second a few seconds after
the process is ready (bench/tasks_burst.py). From each task's due time to its message at the
fake Telegram, p50 and p99, every message counted (none missing, none twice). Telegram's
pacing (TELEGRAM_BOT_RATE, 30 a second by default) spaces 1,000 messages over about 33 s, so
the burst runs twice: with the default pacing, judged by how late each message is beyond the
earliest its place in the pacing allows, and with the bot's rate raised so that what shows
is the turns' own latency, beside 1,000 messages from users at once to the same chats (the
message path's latency under the same load, in the same process). When each task's turn
first called the model is stamped too: the clock, the intake and the runner are behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench import tasks_data as data
from bench.child import cpu_seconds
from bench.core import Row, fakes, row
from bench.tasks_burst import Burst, burst_rows, measure_burst
from bench.tasks_run import Case, membot, wait_index

BENCH = "tasks"
SETTLE = 1.0  # after the index, before the CPU window: the sentinel's turn ends
RATIO_TARGET = 1.2
# "About nothing" while no task is due: the CPU the tasks add to an idle process, ms a second
# (2 ms/s is 0.2% of a core; a scan of the whole index every second would cost tens).
IDLE_TARGET_MS = 2.0


async def measure_startup(case: Case, window: float) -> dict[str, float]:
    await case.store.put_all([data.sentinel()])
    async with fakes() as (tg, llm), membot(tg, llm.base_url, case) as running:
        pid = running.proc.pid
        rss_ready = data.rss_mib(pid)
        index = await wait_index(tg, running, case)
        rss_index = data.rss_mib(pid)
        await asyncio.sleep(SETTLE)  # a measuring window, not synchronisation
        cpu, server = cpu_seconds(pid), case.redis.cpu() if case.redis else 0.0
        began = time.monotonic()
        await asyncio.sleep(window)
        figures = {
            "ready_s": round(running.ready, 3),
            "index_s": round(index, 3),
            "rss_ready_mib": round(rss_ready, 1),
            "rss_index_mib": round(rss_index, 1),
            "peak_rss_mib": round(data.rss_mib(pid, "VmHWM"), 1),
            "window_s": round(time.monotonic() - began, 3),
            "idle_cpu_s": round(cpu_seconds(pid) - cpu, 5),
        }
        if case.redis:
            figures["redis_idle_cpu_s"] = round(case.redis.cpu() - server, 5)
    case.runs.append(figures)
    return figures


@contextlib.asynccontextmanager
async def stores(root: Path, chats: int, per_chat: int) -> AsyncIterator[dict[str, Any]]:
    """The four cases (files and Redis, with and without the pending tasks) and what filling
    them took, every Redis key and file removed afterwards."""
    made: dict[str, Any] = {"cases": []}
    for loaded in (True, False):
        workdir = root / f"files-{'loaded' if loaded else 'empty'}"
        (workdir / "data").mkdir(parents=True)
        store = data.file_store(workdir / "data")
        if loaded:
            began = time.perf_counter()
            count = await data.put(store, data.pending(chats, per_chat))
            made["files_fill_s"] = round(time.perf_counter() - began, 2)
            made["files_disk_mib"] = round(data.disk_mib(workdir / "data"), 2)
            made["tasks"] = count
        settings = {"data_dir": workdir / "data"}
        made["cases"].append(Case("files", loaded, settings, store, workdir))
    async with data.private_redis() as server:
        if server is not None:
            base = await server.used_mib()
            for loaded in (True, False):
                prefix = f"membot-bench-tasks:{uuid.uuid4().hex}:"
                workdir = root / f"redis-{'loaded' if loaded else 'empty'}"
                (workdir / "data").mkdir(parents=True)
                store = data.redis_store(server.client, prefix)
                if loaded:
                    began = time.perf_counter()
                    await data.put(store, data.pending(chats, per_chat))
                    made["redis_fill_s"] = round(time.perf_counter() - began, 2)
                    made["redis_memory_mib"] = round(await server.used_mib() - base, 2)
                settings = {
                    "data_dir": workdir / "data",
                    "storage": "redis",
                    "queue": "redis",
                    "redis_url": server.url,
                    "redis_prefix": prefix,
                }
                made["cases"].append(Case("redis", loaded, settings, store, workdir, server))
        yield made


def _median(runs: list[dict[str, float]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def _idle(runs: list[dict[str, float]], key: str) -> float:
    """CPU per second over every run's window together, ms/s."""
    return sum(r[key] for r in runs) / sum(r["window_s"] for r in runs) * 1000


# (metric, key in a run, unit, judged as a ratio to the reference)
_STARTUP = (
    ("exec to first getUpdates", "ready_s", "s", True),
    ("RSS at ready", "rss_ready_mib", "MiB", True),
    ("RSS with the due index built", "rss_index_mib", "MiB", True),
    ("exec to the first due task sent", "index_s", "s", False),
    ("peak RSS", "peak_rss_mib", "MiB", False),
)
_IDLE = (
    ("CPU while nothing is due", "idle_cpu_s", True),
    ("redis-server CPU while nothing is due", "redis_idle_cpu_s", False),
)


def startup_rows(cases: list[Case], made: dict[str, Any], rounds: int, window: float) -> list[Row]:
    rows: list[Row] = []
    note = (
        f"{made.get('tasks', 0):,} pending tasks over {made.get('chats', 0):,} chats against "
        f"none; {rounds} rounds in alternating order: medians, ratios the median of the rounds' "
        f"own; CPU over {window:g} s a run, the runs together"
    )
    for backend in ("files", "redis"):
        pair = {c.loaded: c for c in cases if c.backend == backend and c.runs}
        if len(pair) < 2:
            continue
        loaded, empty = pair[True], pair[False]
        for case in (loaded, empty):
            for metric, key, unit, _ in _STARTUP:
                value = round(_median(case.runs, key), 3 if unit == "s" else 1)
                rows.append(row(BENCH, case.name, metric, value, unit, note=note))
            for metric, key, _ in _IDLE:
                if key in case.runs[0]:
                    value = round(_idle(case.runs, key), 2)
                    rows.append(row(BENCH, case.name, metric, value, "ms/s"))
        for metric, key, _, judged in _STARTUP:
            # The median of the rounds' own ratios: a round's two runs are next to each other
            # in time, so the machine's drift cancels out.
            ratio = statistics.median(
                a[key] / b[key] for a, b in zip(loaded.runs, empty.runs, strict=True)
            )
            rows.append(
                row(
                    BENCH,
                    f"{backend}: with / without tasks",
                    metric,
                    round(ratio, 2),
                    "x",
                    target=f"<= {RATIO_TARGET}" if judged else "",
                    ok=ratio <= RATIO_TARGET if judged else None,
                )
            )
        for metric, key, judged in _IDLE:
            if key in loaded.runs[0]:
                added = _idle(loaded.runs, key) - _idle(empty.runs, key)
                rows.append(
                    row(
                        BENCH,
                        f"{backend}: with - without tasks",
                        metric,
                        round(added, 2),
                        "ms/s",
                        target=f"<= {IDLE_TARGET_MS:g} ms/s" if judged else "",
                        ok=added <= IDLE_TARGET_MS if judged else None,
                    )
                )
    if "files_disk_mib" in made:
        rows.append(row(BENCH, "files: the tasks' files", "size", made["files_disk_mib"], "MiB"))
    if "redis_memory_mib" in made:
        memory = made["redis_memory_mib"]
        rows.append(row(BENCH, "redis: the tasks' keys", "used_memory", memory, "MiB"))
    return rows


async def run(quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    chats, per_chat, burst = (1_000, 10, 200) if quick else (10_000, 10, 1_000)
    rounds, window = (1, 4.0) if quick else (4, 3.0)
    raw: dict[str, Any] = {}
    bursts: list[Burst] = []
    with tempfile.TemporaryDirectory(prefix="membot-bench-tasks-") as tmp:
        async with stores(Path(tmp), chats, per_chat) as made:
            made["chats"] = chats
            cases: list[Case] = made.pop("cases")
            raw["fill"] = dict(made)
            for n in range(rounds):
                order = cases if n % 2 == 0 else list(reversed(cases))
                for case in order:
                    print(f"  tasks: {case.name}, round {n + 1}", file=sys.stderr, flush=True)
                    await measure_startup(case, window)
            for case in (c for c in cases if c.loaded):
                lead = max(r["index_s"] for r in case.runs) * 1.5 + 3.0
                for rate in ("default", "raised"):
                    print(f"  tasks: {case.name}, burst, {rate} pacing", file=sys.stderr)
                    bursts.append(await measure_burst(case, burst, rate, lead))
            for case in cases:
                raw[case.name] = case.runs
            raw["bursts"] = [b.to_dict() for b in bursts]
    rows = startup_rows(cases, made, rounds, window)
    rows.extend(burst_rows(bursts))
    return rows, raw
