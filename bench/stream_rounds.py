"""What both halves of the `stream` section measure (bench/stream.py over the API,
bench/stream_telegram.py in Telegram): a round of messages at once with membot's CPU over
it, and the section's rows from the rounds, streamed against plain."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.child import Child
from bench.core import Row, median, row
from bench.stream_model import Case

BENCH = "stream"
TARGET_FIRST = 1.0
# membot's CPU for a streamed answer against the same answer plain.
TARGET_RATIO = 2.0


@dataclass(frozen=True, slots=True)
class Names:
    """How a half keeps its rounds (`streamed` and `plain`, the runs' keys; `pieces`, a
    message's count of what was shown while it was written) and names its rows."""

    streamed: str
    plain: str
    pieces: str
    first: str
    done: str
    plain_done: str
    count: str
    cpu: str
    plain_cpu: str
    ratio: str
    per_chunk: str


async def measured(child: Child, asks: Sequence[Awaitable[dict[str, float]]]) -> dict[str, Any]:
    """`asks` at once, each a message's figures; with membot's CPU per message over them,
    nothing of the fakes' or the client's."""
    cpu = child.cpu()
    results = await asyncio.gather(*asks)
    return {"messages": results, "cpu_ms_per_msg": (child.cpu() - cpu) * 1000 / len(asks)}


def rows(case: Case, runs: dict[str, list[dict[str, Any]]], names: Names) -> list[Row]:
    """Medians over every message; CPU per chunk, what a streamed message costs beyond a
    plain one, over its chunks."""

    def every(who: str, key: str) -> list[float]:
        return [float(m[key]) for r in runs[who] for m in r["messages"]]

    def cpu(who: str) -> list[float]:
        return [float(r["cpu_ms_per_msg"]) for r in runs[who]]

    first = median(every(names.streamed, "first"))
    streamed, plain = median(cpu(names.streamed)), median(cpu(names.plain))
    # Each round's streamed figure against the plain one next to it (a drifting machine).
    pairs = zip(cpu(names.streamed), cpu(names.plain), strict=True)
    ratio = median([s / p for s, p in pairs])
    per_chunk = (streamed - plain) * 1000 / case.chunks
    name = case.name
    return [
        row(
            BENCH,
            name,
            names.first,
            round(first, 3),
            "s",
            target=f"<= {TARGET_FIRST}",
            ok=first <= TARGET_FIRST,
        ),
        row(BENCH, name, names.done, round(median(every(names.streamed, "done")), 3), "s"),
        row(BENCH, name, names.plain_done, round(median(every(names.plain, "done")), 3), "s"),
        row(BENCH, name, names.count, round(median(every(names.streamed, names.pieces)))),
        row(BENCH, name, names.cpu, round(streamed, 2), "ms"),
        row(BENCH, name, names.plain_cpu, round(plain, 2), "ms"),
        row(
            BENCH,
            name,
            names.ratio,
            round(ratio, 2),
            "x",
            target=f"<= {TARGET_RATIO}",
            ok=ratio <= TARGET_RATIO,
        ),
        row(BENCH, name, names.per_chunk, round(per_chunk, 1), "µs"),
    ]
