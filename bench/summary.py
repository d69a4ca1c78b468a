"""Summarization off the critical path.

Every LLM reply (answers and summaries alike) takes 1 s. One chat sends 41 messages one after
another with membot's default SUMMARY_EVERY=20. Each exchange stores two messages (question and
answer), so a summary is started right after answers 10, 20, 30 and 40 (messages 20, 40, 60
and 80). If summarizing were on the critical path, those answers - or the ones right after
them (11, 21, 31, 41), which would wait for the chat - would take about 2 s instead of 1 s.

The 20th and 40th answers, as the target names them, are reported as they are; the answers
at which summaries actually start and the ones after them are reported too. Each ratio is
the answer's latency over the median answer's; the target is at most 1.1.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.core import Row, fakes, make_membot, median, row, running

BENCH = "summary"
TARGET_RATIO = 1.1
SUMMARY_EVERY = 20
CHAT = 3001


async def run(quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    # The quick smoke run keeps the shape but not the 1 s latency or the 41 answers.
    latency, answers = (0.5, 21) if quick else (1.0, 41)
    latencies: list[float] = []
    with tempfile.TemporaryDirectory(prefix="membot-bench-") as tmp:
        async with fakes(latency=latency) as (tg, llm):
            app = make_membot(tg, llm, Path(tmp) / "data", summary_every=SUMMARY_EVERY)
            async with running(app, tg):
                for n in range(1, answers + 1):
                    latencies.append(await tg.ask(CHAT, f"question number {n}, please"))
                # Let the last summary land before stopping, to count it.
                expected = answers * 2 // SUMMARY_EVERY
                await llm.wait_until(
                    lambda: len(llm.summary_requests) >= expected and llm.in_flight == 0,
                    timeout=30 * latency + 10,
                    what=f"{expected} summaries",
                )
            summaries = len(llm.summary_requests)
    return _rows(latencies, latency, summaries), {
        "llm_latency_s": latency,
        "summary_every": SUMMARY_EVERY,
        "latencies_ms": [round(x * 1000, 2) for x in latencies],
        "summary_requests": summaries,
    }


def _rows(latencies: list[float], llm_latency: float, summaries: int) -> list[Row]:
    mid = median(latencies)
    note = f"LLM latency {llm_latency:g} s, SUMMARY_EVERY={SUMMARY_EVERY}"
    rows: list[Row] = [
        row(BENCH, f"{len(latencies)} answers", "median answer", mid * 1000, "ms", note=note),
        row(
            BENCH,
            f"{len(latencies)} answers",
            "summaries made",
            summaries,
            "",
            target=f"= {len(latencies) * 2 // SUMMARY_EVERY}",
            ok=summaries == len(latencies) * 2 // SUMMARY_EVERY,
        ),
    ]

    def ratio_row(n: int, case: str) -> None:
        if n > len(latencies):
            return
        ratio = latencies[n - 1] / mid
        rows.append(
            row(
                BENCH,
                case,
                f"answer {n} / median",
                ratio,
                "x",
                target=f"<= {TARGET_RATIO}",
                ok=ratio <= TARGET_RATIO,
                note=note,
            )
        )

    for n in (20, 40):
        ratio_row(n, "answers 20, 40")
    # Answer n stores message 2n; the summary starts right after it is sent and runs while
    # answer n + 1 is being made.
    for n in range(SUMMARY_EVERY // 2, len(latencies) + 1, SUMMARY_EVERY // 2):
        ratio_row(n, f"summary starts (msg {2 * n})")
        ratio_row(n + 1, f"summary running (msg {2 * n})")
    return rows
