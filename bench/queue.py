"""Scale-out (QUEUE=redis): throughput and latency with 1, 2 and 4 worker processes, and what
the queue costs per message beside one `membot run` process (QUEUE=local).

Every bot here is a real process (`python -m membot receive|worker|run`), as deployed: a
receiver and N workers on the local Redis (a prefix of this run's own, deleted afterwards),
against the bench's fake Telegram and fake model, which run in this process. Load: 64 chats
at once, each sending its messages one after another (each waits for its answer).

Cases: a zero-latency model (what the processes themselves can do: the machine's cores are
the limit) and a 0.5 s model (what a real model looks like: waiting, not CPU, is the limit).
`WORKER_CONCURRENCY=8` here, so one worker answers at most 8 chats at a time: with a 0.5 s
model that is at most 16 answers/s per worker, and the figures show whether adding workers
adds that capacity. (The default, 64, would let one worker take all 64 chats at once and
hide the scaling.)

"queue cost" compares CPU per message of the bot processes (receiver + 1 worker, against one
`membot run` with QUEUE=local, both on STORAGE=redis), zero-latency model, same load: the
difference is what routing every update through a stream costs. The Redis server's CPU and
the fakes' are left out of both.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench.child import cpu_seconds
from bench.core import (
    REDIS_URL,
    Row,
    RunStats,
    TimedTelegram,
    drive,
    fakes,
    process_env,
    row,
)

BENCH = "queue"
CHATS = 64
SHARDS = 16
CONCURRENCY = 8
READY_TIMEOUT = 60.0


class Processes:
    def __init__(self, env: dict[str, str], workdir: Path) -> None:
        self.env = env
        self.workdir = workdir
        self.procs: list[asyncio.subprocess.Process] = []

    async def spawn(self, command: str, name: str) -> None:
        env = {**self.env, "DATA_DIR": str(self.workdir / name)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "membot",
            command,
            cwd=self.workdir,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=(self.workdir / f"{name}.stderr").open("wb"),
        )
        self.procs.append(proc)

    def cpu(self) -> float:
        return sum(cpu_seconds(p.pid) for p in self.procs if p.returncode is None)

    async def stop(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.terminate()
        for proc in self.procs:
            try:
                await asyncio.wait_for(proc.wait(), 60)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _until(what: str, check: Any) -> None:
    """Poll a condition of another process's making (Redis state): the bench, not a test."""
    deadline = time.monotonic() + READY_TIMEOUT
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"queue bench: gave up waiting for {what}")
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def cluster(
    tg: TimedTelegram, llm_url: str, workers: int, *, queue: bool
) -> AsyncIterator[Processes]:
    from membot.redis.client import create_client

    prefix = f"membot-bench-q:{uuid.uuid4().hex}:"
    env = process_env(
        tg,
        llm_url,
        storage="redis",
        queue="redis" if queue else "local",
        redis_url=REDIS_URL,
        redis_prefix=prefix,
        queue_shards=SHARDS,
        worker_concurrency=CONCURRENCY,
    )
    client = create_client(REDIS_URL)
    with tempfile.TemporaryDirectory(prefix="membot-bench-queue-") as tmp:
        procs = Processes(env, Path(tmp))
        try:
            polls = tg.call_count("getUpdates")
            if queue:
                await procs.spawn("receive", "receiver")
                await asyncio.gather(*(procs.spawn("worker", f"w{n}") for n in range(workers)))
            else:
                await procs.spawn("run", "run")
            await tg.wait_for_call("getUpdates", timeout=READY_TIMEOUT, count=polls + 1)
            if queue:

                async def shared() -> bool:
                    keys = [f"{prefix}q:lease:{n}" for n in range(SHARDS)]
                    holders = {h for h in await client.mget(keys) if h}
                    return len(holders) == workers

                await _until(f"{workers} workers to share the shards", shared)
            yield procs
        finally:
            await procs.stop()
            keys = [k async for k in client.scan_iter(match=f"{prefix}*")]
            if keys:
                await client.delete(*keys)
            await client.aclose()


async def _measure(
    workers: int, latency: float, per_chat: int, *, queue: bool = True
) -> tuple[RunStats, float]:
    async with contextlib.AsyncExitStack() as stack:
        tg, llm = await stack.enter_async_context(fakes(latency=latency))
        procs = await stack.enter_async_context(cluster(tg, llm.base_url, workers, queue=queue))
        chats = list(range(9_000_001, 9_000_001 + CHATS))
        await drive(tg, chats[:4], 1, "warm")  # imports, pools, first Redis scripts
        before = procs.cpu()
        stats = await drive(tg, chats, per_chat, f"w{workers}l{latency}")
        cpu = procs.cpu() - before
    return stats, cpu / stats.messages * 1000


async def run(quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    from redis.exceptions import RedisError

    from membot.redis.client import create_client

    client = create_client(REDIS_URL)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        print(f"  queue: Redis unreachable ({exc}): skipped", file=sys.stderr)
        return [], {"skipped": str(exc)}
    finally:
        await client.aclose()

    rows: list[Row] = []
    raw: dict[str, Any] = {}
    counts = (1, 2, 4)
    for latency, per_chat in ((0.0, 2 if quick else 6), (0.5, 1 if quick else 3)):
        base: float | None = None
        for workers in counts:
            stats, cpu_ms = await _measure(workers, latency, per_chat)
            raw[f"workers={workers} latency={latency}"] = {**stats.to_dict(), "cpu_ms": cpu_ms}
            case = f"{workers} worker(s), model {int(latency * 1000)} ms"
            note = f"{CHATS} chats x {per_chat}, WORKER_CONCURRENCY={CONCURRENCY}"
            rows.append(
                row(BENCH, case, "throughput", round(stats.throughput, 1), "msg/s", note=note)
            )
            rows.append(row(BENCH, case, "p50", round(stats.p50_ms, 1), "ms"))
            rows.append(row(BENCH, case, "p99", round(stats.p99_ms, 1), "ms"))
            if base is None:
                base = stats.throughput
            else:
                rows.append(
                    row(
                        BENCH,
                        case,
                        "throughput vs 1 worker",
                        round(stats.throughput / base, 2),
                        "x",
                    )
                )
    per_chat = 2 if quick else 6
    local, local_cpu = await _measure(1, 0.0, per_chat, queue=False)
    queued, queued_cpu = await _measure(1, 0.0, per_chat)
    raw["queue cost"] = {
        "local": {**local.to_dict(), "cpu_ms": local_cpu},
        "redis": {**queued.to_dict(), "cpu_ms": queued_cpu},
    }
    case = "queue cost, model 0 ms"
    note = "receiver + 1 worker vs one `membot run`, both STORAGE=redis; bot processes' CPU"
    rows.append(row(BENCH, case, "CPU/msg QUEUE=local", round(local_cpu, 2), "ms", note=note))
    rows.append(row(BENCH, case, "CPU/msg QUEUE=redis", round(queued_cpu, 2), "ms"))
    rows.append(row(BENCH, case, "queue CPU/msg", round(queued_cpu - local_cpu, 2), "ms"))
    rows.append(
        row(
            BENCH,
            case,
            "throughput redis/local",
            round(queued.throughput / local.throughput, 2),
            "x",
        )
    )
    return rows, raw
