"""Many tasks due in the same second (bench/tasks.py): each one's time from due to its message
at the fake Telegram, and every message counted.

The tasks are written into the case's store (beside its pending ones) before the process
starts, due `lead` seconds later: after its due index is built (the sentinel's message says
so, and the figures say whether it came before the due time). The fake Telegram stamps each
`sendMessage` on this process's monotonic clock; the due time (wall clock) is put on it once.

With the default pacing the bot sends at most TELEGRAM_BOT_RATE messages a second after a
second's worth at once (bot/limits.py), so the k-th message (from 0) cannot go before
max(0, k - rate + 1) / rate seconds after the due time: "beyond pacing" is how much later than
that each one came. With the rate raised, the same 1,000 chats are then sent one message each
at once by their users: the latency of the message path under the same load, for reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from bench import tasks_data as data
from bench.core import Row, drive, fakes, percentile, row
from bench.tasks_run import Case, membot, wait_index
from membot.clock import utc_now
from membot.config import Settings

BENCH = "tasks"
AFTER = 3.0  # seconds watched after the last message, for any sent twice
P99_BEYOND_PACING_S = 1.0
REFERENCE_TARGET = 1.2  # tasks' p99 against users' messages to the same chats at once
RAISED_BOT_RATE = 10_000.0  # the bench's own (bench/core.py), its highest allowed


def _default(name: str) -> Any:
    return Settings.model_fields[name].default


def pacing(rate: str) -> dict[str, Any]:
    """Telegram's pacing settings: membot's defaults, or the bench's raised ones (bench/core.py
    bench_values)."""
    if rate == "raised":
        return {"telegram_bot_rate": RAISED_BOT_RATE}
    names = ("telegram_chat_rate", "telegram_chat_burst", "telegram_group_rate")
    return {name: _default(name) for name in (*names, "telegram_bot_rate")}


def bot_rate(rate: str) -> float:
    return float(pacing(rate)["telegram_bot_rate"])


def earliest(rank: int, rate: float) -> float:
    """Seconds after the due time before which the rank-th message (from 0) cannot go at this
    bot-wide rate: a second's worth at once, then one every 1/rate (bot/limits.py)."""
    allowed = max(1, int(rate))
    return max(0, rank - allowed + 1) / rate


@dataclass
class Burst:
    backend: str
    rate: str  # "default" or "raised"
    bot_rate: float
    tasks: int
    lead: float
    index_before_due: bool = False
    latencies: list[float] = field(default_factory=list)  # seconds, due to message, sorted
    beyond: list[float] = field(default_factory=list)  # the same, less the pacing
    once: int = 0
    missing: int = 0
    twice: int = 0
    left: int = 0  # burst tasks still in the store afterwards (each should have run once)
    reference: list[float] = field(default_factory=list)  # users' messages, push to answer
    called: list[float] = field(default_factory=list)  # seconds, due to the model called

    def to_dict(self) -> dict[str, Any]:
        def ms(values: list[float], q: float) -> float | None:
            return round(percentile(values, q) * 1000, 1) if values else None

        return {
            "backend": self.backend,
            "pacing": self.rate,
            "bot_rate": self.bot_rate,
            "tasks": self.tasks,
            "lead_s": round(self.lead, 2),
            "index_before_due": self.index_before_due,
            "sent_once": self.once,
            "missing": self.missing,
            "twice": self.twice,
            "left_in_store": self.left,
            **{f"p{q}_ms": ms(self.latencies, q) for q in (50, 90, 99, 100)},
            **{f"beyond_pacing_p{q}_ms": ms(self.beyond, q) for q in (50, 99)},
            **{f"model_called_p{q}_ms": ms(self.called, q) for q in (0, 50, 99)},
            **{f"messages_p{q}_ms": ms(self.reference, q) for q in (50, 99)},
        }


_BURST = re.compile(r"burst (\d+) chat (\d+):")


class _Calls:
    """When the model was first called for each burst task: its turn has begun (the clock,
    the intake and the runner are behind it; the model's answer and the send ahead)."""

    def __init__(self, llm: Any, tag: int) -> None:
        self.llm = llm
        self.tag = tag
        self.first: dict[int, float] = {}
        llm.set_responder(self.respond)

    def respond(self, body: dict[str, Any]) -> Any:
        at = time.monotonic()
        messages = body.get("messages") or []
        found = _BURST.search(json.dumps(messages[-1])) if messages else None
        if found is not None and int(found.group(1)) == self.tag:
            self.first.setdefault(int(found.group(2)), at)
        return self.llm.default_reply(body)


class _Counter:
    """Each burst chat's messages naming its task, counted as the fake records them."""

    def __init__(self, tg: Any, chats: list[int], tag: int) -> None:
        self.tg = tg
        self.texts = {chat: data.burst_text(chat, tag) for chat in chats}
        self.first: dict[int, float] = {}
        self.counts: dict[int, int] = {}
        self._seen = 0

    def update(self) -> bool:
        sent = self.tg.sent
        for message in sent[self._seen :]:
            text = self.texts.get(message.chat_id)
            if text is not None and text in message.text:
                self.counts[message.chat_id] = self.counts.get(message.chat_id, 0) + 1
                self.first.setdefault(message.chat_id, message.at)
        self._seen = len(sent)
        return len(self.first) == len(self.texts)


async def measure_burst(case: Case, count: int, rate: str, lead: float) -> Burst:
    tag = int(time.time()) % 1000
    chats = [data.FIRST_CHAT + c for c in range(count)]
    rate_per_s = bot_rate(rate)
    result = Burst(case.backend, rate, rate_per_s, count, lead)
    due = utc_now().replace(microsecond=0) + timedelta(seconds=lead + 1)
    await data.put(case.store, [*data.burst(count, due, tag), data.sentinel()])
    async with fakes() as (tg, llm), membot(tg, llm.base_url, case, **pacing(rate)) as running:
        due_at = due.timestamp() - (time.time() - time.monotonic())  # on the fake's clock
        calls = _Calls(llm, tag)
        await wait_index(tg, running, case)
        result.index_before_due = time.monotonic() < due_at
        counter = _Counter(tg, chats, tag)
        timeout = max(due_at - time.monotonic(), 0) + count / rate_per_s + 120
        with contextlib.suppress(AssertionError):  # what never came is counted as missing
            await tg.wait_until(counter.update, timeout, what="every due task's message")
        await asyncio.sleep(AFTER)  # a window to see doubles in, not synchronisation
        counter.update()
        result.latencies = sorted(at - due_at for at in counter.first.values())
        result.beyond = sorted(
            late - earliest(rank, rate_per_s) for rank, late in enumerate(result.latencies)
        )
        result.called = sorted(at - due_at for at in calls.first.values())
        result.missing = count - len(counter.first)
        result.once = sum(1 for n in counter.counts.values() if n == 1)
        result.twice = sum(n - 1 for n in counter.counts.values() if n > 1)
        if rate == "raised":
            result.reference = (await drive(tg, chats, 1, "reference")).latencies
    for chat in chats:
        result.left += sum(1 for t in await case.store.tasks(chat) if t.id.startswith("b"))
    return result


def _ms(values: list[float], q: float) -> float | None:
    return round(percentile(values, q) * 1000, 1) if values else None


def burst_rows(bursts: list[Burst]) -> list[Row]:
    rows: list[Row] = []
    for b in bursts:
        case = f"{b.backend}: due at once, {b.rate} pacing"
        count = f"{b.tasks:,} tasks due at once in as many chats"
        rate = f"{b.rate} pacing: TELEGRAM_BOT_RATE={b.bot_rate:g}"
        ready = "yes" if b.index_before_due else "no"
        rows += [
            row(BENCH, case, "sent once", b.once, "msgs", target=f"= {b.tasks}", note=count),
            row(BENCH, case, "missing", b.missing, "msgs", target="= 0", note=rate),
            row(BENCH, case, "sent twice", b.twice, "msgs", target="= 0"),
            row(BENCH, case, "left in the store", b.left, "tasks", target="= 0"),
            row(BENCH, case, "index built before the due time", ready, ok=b.index_before_due),
            row(BENCH, case, "due to the first model call", _ms(b.called, 0), "ms"),
            row(BENCH, case, "due to model called p50", _ms(b.called, 50), "ms"),
            row(BENCH, case, "due to model called p99", _ms(b.called, 99), "ms"),
            row(BENCH, case, "due to sent p50", _ms(b.latencies, 50), "ms"),
            row(BENCH, case, "due to sent p99", _ms(b.latencies, 99), "ms"),
        ]
        if b.rate == "default" and b.beyond:
            # The goal: p99 within a second of what Telegram's pacing allows.
            beyond = percentile(b.beyond, 99)
            target = f"<= {P99_BEYOND_PACING_S * 1000:g} ms"
            ok = beyond <= P99_BEYOND_PACING_S
            rows.append(
                row(BENCH, case, "p99 beyond pacing", _ms(b.beyond, 99), "ms", target=target, ok=ok)
            )
        if b.reference and b.latencies:
            # No pacing to speak of: the turns' own CPU, beside users' messages to the same chats.
            ratio = percentile(b.latencies, 99) / percentile(b.reference, 99)
            target = f"<= {REFERENCE_TARGET}"
            rows += [
                row(BENCH, case, "users' messages p50", _ms(b.reference, 50), "ms"),
                row(BENCH, case, "users' messages p99", _ms(b.reference, 99), "ms"),
                row(
                    BENCH,
                    case,
                    "p99 tasks / users' messages",
                    round(ratio, 2),
                    "x",
                    target=target,
                    ok=ratio <= REFERENCE_TARGET,
                ),
            ]
    return rows
