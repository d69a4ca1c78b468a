"""Shared pieces of the benchmarks: result rows, statistics, the fakes and the bots under test.

Everything runs in one process and one event loop, like the end-to-end tests: the fake
Telegram Bot API and the fake OpenAI-compatible server are real aiohttp servers on 127.0.0.1,
and the bot under test (membot's ``Process`` or the floor relay) reaches them only through
its configured base URLs, with its real polling loop.

Latency is measured from the moment an update is pushed into the fake Telegram to the moment
the fake receives the ``sendMessage`` that answers it (stamped inside the fake's request
handler, not when a waiter wakes up).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import operator
import os
import re
import socket
import sys
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypedDict

from tests.fakes import FakeLLM, FakeTelegram, SentMessage
from tests.fakes.process import membot_env

from bench.report import format_number, table
from membot.api.server import ApiServer
from membot.config import Settings, load_settings
from membot.core.summarizer import INSTRUCTIONS
from membot.roles.process import Process
from membot.wiring import build_core

TOKEN = "4242:BENCH-TOKEN"
API_KEY = "sk-bench-key"
MODEL = "bench/model"
# Only the summarizer's own instructions mark a summarization request (as in the tests).
SUMMARIZER_MARKER = INSTRUCTIONS.split(".")[0]
ANSWER_TIMEOUT = 60.0
READY_TIMEOUT = 30.0
# The Redis the STORAGE=redis figures use (the one the tests use too); each run works under a
# prefix of its own and deletes every key under it afterwards.
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


# --------------------------------------------------------------------------------------------
# Result rows
# --------------------------------------------------------------------------------------------


class Row(TypedDict, total=False):
    """One line of the table and of results.json.

    ``benchmark``, ``case``, ``metric``, ``value`` and ``unit`` are always present; ``target``
    is a human-readable bound such as ">= 0.8" (empty when informational) and ``ok`` says
    whether ``value`` meets it (None when there is no target). ``note`` explains the case.
    Other modules (bench/search.py) may return rows with only some keys; they are completed
    by :func:`normalize_row`, and unknown keys are kept in results.json.
    """

    benchmark: str
    case: str
    metric: str
    value: float | int | str | None
    unit: str
    target: str
    ok: bool | None
    note: str


def row(
    benchmark: str,
    case: str,
    metric: str,
    value: float | int | str | None,
    unit: str = "",
    *,
    target: str = "",
    ok: bool | None = None,
    note: str = "",
) -> Row:
    return Row(
        benchmark=benchmark,
        case=case,
        metric=metric,
        value=value,
        unit=unit,
        target=target,
        ok=ok,
        note=note,
    )


_TARGET = re.compile(r"^\s*(<=|>=|<|>|=|≤|≥)\s*(-?[0-9][0-9_,]*(?:\.[0-9]+)?)\s*(\S*)\s*$")
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "≤": operator.le,
    ">=": operator.ge,
    "≥": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
    "=": operator.eq,
}


def judge(value: Any, target: str, unit: str = "") -> bool | None:
    """Whether ``value`` meets a target such as "<= 1.15", ">= 0.8" or "< 50 ms".

    None when there is nothing to judge: no target, not a number, or the target is in
    another unit than the value.
    """
    match = _TARGET.match(target or "")
    if match is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    op, number, target_unit = match.groups()
    if target_unit and target_unit != unit:
        return None
    return _COMPARE[op](float(value), float(number.replace(",", "").replace("_", "")))


def normalize_row(raw: dict[str, Any], default_benchmark: str) -> dict[str, Any]:
    """Fill in the keys every row has; keep whatever else the producer put there. A row with
    a target it did not judge itself gets ``ok`` from :func:`judge`."""
    out = dict(raw)
    out.setdefault("benchmark", default_benchmark)
    out.setdefault("case", "")
    out.setdefault("metric", out.pop("name", ""))
    out.setdefault("value", None)
    out.setdefault("unit", "")
    out.setdefault("target", "")
    if out.get("ok") is None:
        out["ok"] = judge(out["value"], str(out["target"]), str(out["unit"]))
    out.setdefault("note", "")
    return out


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as `python -m bench` prints them (the page's tables are bench/report.py's)."""
    headers = ("benchmark", "case", "metric", "value", "unit", "target", "ok")
    cells = [
        (
            str(r.get("benchmark", "")),
            str(r.get("case", "")),
            str(r.get("metric", "")),
            format_number(r.get("value")),
            str(r.get("unit", "")),
            str(r.get("target", "")),
            {True: "yes", False: "NO", None: ""}[r.get("ok")],
        )
        for r in rows
    ]
    return table(headers, cells, padded=(3,))


def format_notes(rows: Sequence[dict[str, Any]]) -> str:
    """The rows' notes (how each figure was obtained), once each, under the table."""
    seen: dict[str, list[str]] = {}
    for r in rows:
        note = str(r.get("note") or "")
        notes = seen.setdefault(str(r.get("benchmark", "")), [])
        if note and note not in notes:
            notes.append(note)
    lines = [f"  {bench}: {'; '.join(notes)}" for bench, notes in seen.items() if notes]
    return "notes:\n" + "\n".join(lines) if lines else ""


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100), like numpy's default."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50.0)


@dataclass(slots=True)
class RunStats:
    """One measured run: how many answers, over how long, with which latencies (seconds)."""

    messages: int
    wall: float
    latencies: list[float] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        return self.messages / self.wall if self.wall > 0 else math.nan

    @property
    def p50_ms(self) -> float:
        return percentile(self.latencies, 50.0) * 1000

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies, 99.0) * 1000

    def to_dict(self) -> dict[str, float | int]:
        return {
            "messages": self.messages,
            "wall_s": round(self.wall, 4),
            "msgs_per_s": round(self.throughput, 2),
            "p50_ms": round(self.p50_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
        }


# --------------------------------------------------------------------------------------------
# The fake Telegram, with answer timestamps
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Answer:
    at: float  # time.perf_counter() when the fake received the sendMessage
    message: SentMessage


class TimedTelegram(FakeTelegram):
    """FakeTelegram that stamps each ``sendMessage`` as it is recorded and hands it to whoever
    expects an answer in that chat (first come, first served), without waking every waiter."""

    def __init__(self, token: str = TOKEN) -> None:
        super().__init__(token=token)
        self._expected: dict[int, deque[asyncio.Future[Answer]]] = {}
        self.unexpected: list[SentMessage] = []

    def _record(self, sent: SentMessage) -> None:
        at = time.perf_counter()
        super()._record(sent)
        waiters = self._expected.get(sent.chat_id)
        while waiters:
            future = waiters.popleft()
            if not future.done():
                future.set_result(Answer(at, sent))
                return
        self.unexpected.append(sent)

    def expect_answer(self, chat_id: int) -> asyncio.Future[Answer]:
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._expected.setdefault(chat_id, deque()).append(future)
        return future

    async def ask(self, chat_id: int, text: str, timeout: float = ANSWER_TIMEOUT) -> float:
        """Push ``text`` from the user of ``chat_id``; seconds until the answer was received."""
        future = self.expect_answer(chat_id)
        started = time.perf_counter()
        self.push_text(chat_id, text)
        try:
            answer = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise RuntimeError(
                f"no answer in chat {chat_id} within {timeout}s to {text!r}\n{self.describe()}"
            ) from None
        if text not in answer.message.text:
            raise RuntimeError(
                f"chat {chat_id}: unexpected answer {answer.message.text!r} to {text!r}"
            )
        return answer.at - started


# --------------------------------------------------------------------------------------------
# Bots under test
# --------------------------------------------------------------------------------------------


class BotApp(Protocol):
    async def run(self, *, handle_signals: bool = True) -> None: ...

    async def stop(self) -> None: ...


@contextlib.asynccontextmanager
async def fakes(*, latency: float = 0.0) -> AsyncIterator[tuple[TimedTelegram, FakeLLM]]:
    async with TimedTelegram() as tg, FakeLLM(api_key=API_KEY, latency=latency) as llm:
        llm.summary_marker = SUMMARIZER_MARKER
        yield tg, llm


def bench_values(tg: FakeTelegram, llm_url: str, **overrides: Any) -> dict[str, Any]:
    """membot's defaults (window, tools, summaries...) pointed at the fakes, as settings."""
    values: dict[str, Any] = {
        "telegram_bot_token": TOKEN,
        "telegram_api_base": tg.base_url,
        "openrouter_api_key": API_KEY,
        "openrouter_base_url": llm_url,
        "openrouter_model": MODEL,
        "log_level": "WARNING",
        # Telegram's pace (about one message a second per chat) would be all that one chat
        # sending messages back to back measures; the bench measures membot's own cost.
        "telegram_chat_rate": 1000.0,
        "telegram_chat_burst": 100,
        "telegram_group_rate": 60_000.0,
        "telegram_bot_rate": 10_000.0,
    }
    values.update(overrides)
    return values


def membot_settings(tg: FakeTelegram, llm: FakeLLM, data_dir: Path, **overrides: Any) -> Settings:
    """The settings of an in-process membot (see bench_values)."""
    values = bench_values(tg, llm.base_url, data_dir=data_dir, **overrides)
    return load_settings(_env_file=None, **values)


def process_env(tg: FakeTelegram, llm_url: str, **overrides: Any) -> dict[str, str]:
    """The environment of a membot process (`python -m membot ...`, see bench_values)."""
    values = bench_values(tg, llm_url, **overrides)
    return membot_env(**{name: str(value) for name, value in values.items()})


def make_membot(tg: FakeTelegram, llm: FakeLLM, data_dir: Path, **overrides: Any) -> Process:
    return Process(membot_settings(tg, llm, data_dir, **overrides))


def make_floor(tg: FakeTelegram, llm: FakeLLM) -> BotApp:
    from bench.floor import FloorRelay

    return FloorRelay(
        telegram_token=TOKEN,
        telegram_api_base=tg.base_url,
        api_key=API_KEY,
        llm_base_url=llm.base_url,
        model=MODEL,
    )


def peak_rss_mib(pid: int) -> float:
    """A child process's peak resident memory (VmHWM), MiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return math.nan


def make_durable_floor(tg: FakeTelegram, llm: FakeLLM, data_dir: Path) -> BotApp:
    from bench.floor import DurableFloorRelay

    return DurableFloorRelay(
        data_dir=data_dir,
        window=20,  # membot's WINDOW_SIZE default
        telegram_token=TOKEN,
        telegram_api_base=tg.base_url,
        api_key=API_KEY,
        llm_base_url=llm.base_url,
        model=MODEL,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def api_server(
    llm: FakeLLM, data_dir: Path, *, token: str, max_rounds: int
) -> AsyncIterator[str]:
    """membot's HTTP API alone (`ApiServer` over `build_core`, as `membot api` runs it) in the
    bench's process, on a free port, pointed at ``llm``; yields its base URL, and stops it as
    `membot api` does (no new requests, then the server, then the core)."""
    port = free_port()
    settings = load_settings(
        _env_file=None,
        telegram=False,
        api=True,
        openrouter_api_key=API_KEY,
        openrouter_base_url=llm.base_url,
        openrouter_model=MODEL,
        data_dir=data_dir,
        api_port=port,
        api_tokens=token,
        max_rounds=max_rounds,
        log_level="WARNING",
    )
    core = build_core(settings)
    server = ApiServer(settings, core)
    await server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await server.stop_accepting()
        await server.close()
        await core.aclose()


@contextlib.asynccontextmanager
async def running(app: BotApp, tg: FakeTelegram) -> AsyncIterator[BotApp]:
    """Run ``app``'s real polling loop until the block exits; ready once it long-polls."""
    polls_before = tg.call_count("getUpdates")
    task = asyncio.create_task(app.run(handle_signals=False))
    ready = asyncio.create_task(
        tg.wait_for_call("getUpdates", timeout=READY_TIMEOUT, count=polls_before + 1)
    )
    try:
        await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # startup failed: raise its error
            raise RuntimeError("the bot stopped before it started polling")
        ready.result()
        # What `membot run`'s main() does once the bot is up (bench/floor.py gets it too, so
        # the comparison is fair): the long-lived heap out of the collector's sight.
        gc.collect()
        gc.freeze()
        yield app
    finally:
        ready.cancel()
        if not task.done():
            await app.stop()
        await task


async def drive(
    tg: TimedTelegram, chats: Sequence[int], per_chat: int, tag: str, *, count_missing: bool = False
) -> RunStats:
    """Every chat sends ``per_chat`` messages one after another (each waits for its answer);
    the chats run concurrently. Returns the wall time over all of them and every latency.
    A message left unanswered fails the run, or with ``count_missing`` ends that chat's
    messages (the others go on) and is missing from ``messages``, the answers received."""
    latencies: list[float] = []

    async def one_chat(chat_id: int) -> None:
        for i in range(per_chat):
            text = f"{tag} c{chat_id} m{i}: what would be a good name for a grey cat?"
            try:
                latencies.append(await tg.ask(chat_id, text))
            except RuntimeError:
                if not count_missing:
                    raise
                return

    started = time.perf_counter()
    await asyncio.gather(*(one_chat(c) for c in chats))
    wall = time.perf_counter() - started
    return RunStats(messages=len(latencies), wall=wall, latencies=latencies)


# --------------------------------------------------------------------------------------------
# Redis (STORAGE=redis figures)
# --------------------------------------------------------------------------------------------


def redis_settings(prefix: str) -> dict[str, Any]:
    """The settings that put membot on the bench's Redis, under ``prefix``."""
    return {"storage": "redis", "redis_url": REDIS_URL, "redis_prefix": prefix}


def _no_persistence_warning(record: logging.LogRecord) -> bool:
    """A scratch server for the bench need not persist: membot's start-up warning says so."""
    return "persists nothing" not in record.getMessage()


@contextlib.asynccontextmanager
async def redis_scratch() -> AsyncIterator[str | None]:
    """A fresh key prefix on the bench's Redis, every key under it deleted afterwards; None
    (with a line on stderr) when Redis cannot be reached, so the caller can skip its figures
    rather than fail the whole section."""
    from redis.exceptions import RedisError

    from membot.redis.client import create_client

    logging.getLogger("membot.memory.redis").addFilter(_no_persistence_warning)  # added once
    client = create_client(REDIS_URL)
    prefix = f"membot-bench:{uuid.uuid4().hex}:"
    try:
        try:
            await client.ping()
        except RedisError as exc:
            print(
                f"  Redis at {REDIS_URL} unreachable ({exc}): redis figures skipped",
                file=sys.stderr,
            )
            yield None
            return
        try:
            yield prefix
        finally:
            batch: list[str] = []
            async for key in client.scan_iter(match=f"{prefix}*", count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    await client.delete(*batch)
                    batch.clear()
            if batch:
                await client.delete(*batch)
    finally:
        await client.aclose()
