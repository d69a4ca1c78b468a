"""Streaming in Telegram: when a private chat sees the first words (the first draft), how many
drafts an answer takes, and what drafts cost membot per message against STREAMING=false.

The same fake model as the API half (bench/stream_model.py: 1,500 characters over 6 s, the
first piece after 0.5 s; a plain call gets the whole answer after 6 s). The real bot (polling,
files with fsync, the usage ledger) answers CONCURRENT private chats at once, each asking one
question a round, ROUNDS rounds with STREAMING=true and =false alternately (A B A B). Time to
the first draft and to the final message are taken at the fake Bot API from when the update was
pushed; medians over every message. CPU per message is the process's over a round (bot, core,
fake Telegram and fake model together)."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.core import Row, TimedTelegram, fakes, make_membot, median, row, running
from bench.stream_model import CASE, reply

BENCH = "stream"
CONCURRENT = 10
ROUNDS = 4  # two of each


async def _ask(tg: TimedTelegram, chat_id: int, text: str) -> dict[str, float]:
    future = tg.expect_answer(chat_id)
    started, started_mono = time.perf_counter(), time.monotonic()
    before = len(tg.drafts_to(chat_id))
    tg.push_text(chat_id, text)
    answer = await asyncio.wait_for(future, 60)
    done = answer.at - started
    drafts = tg.drafts_to(chat_id)[before:]
    first = drafts[0].at - started_mono if drafts else done
    return {"first": first, "done": done, "drafts": len(drafts)}


async def _round(tg: TimedTelegram, chats: range, tag: str) -> dict[str, Any]:
    cpu = time.process_time()
    results = await asyncio.gather(*(_ask(tg, chat, f"plan my week ({tag})") for chat in chats))
    return {"messages": results, "cpu_ms_per_msg": (time.process_time() - cpu) * 1000 / len(chats)}


async def run(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    rounds = 2 if quick else ROUNDS
    chats = range(7001, 7001 + (4 if quick else CONCURRENT))
    runs: dict[str, list[dict[str, Any]]] = {"drafts": [], "single": []}
    with tempfile.TemporaryDirectory(prefix="membot-bench-drafts-") as tmp:
        async with fakes() as (tg, llm):
            llm.set_responder(reply)
            for i in range(rounds):
                streaming = i % 2 == 0
                data = Path(tmp) / f"data-{i}"
                async with running(make_membot(tg, llm, data, streaming=streaming), tg):
                    result = await _round(tg, chats, f"r{i}")
                runs["drafts" if streaming else "single"].append(result)

    def every(who: str, key: str) -> list[float]:
        return [float(m[key]) for r in runs[who] for m in r["messages"]]

    def cpu(who: str) -> float:
        return median([float(r["cpu_ms_per_msg"]) for r in runs[who]])

    first = median(every("drafts", "first"))
    rows = [
        row(
            BENCH,
            CASE,
            "telegram: first draft p50",
            round(first, 3),
            "s",
            target="<= 1.0",
            ok=first <= 1.0,
        ),
        row(
            BENCH,
            CASE,
            "telegram: final message p50",
            round(median(every("drafts", "done")), 3),
            "s",
        ),
        row(
            BENCH,
            CASE,
            "telegram, STREAMING=false: message p50",
            round(median(every("single", "done")), 3),
            "s",
        ),
        row(BENCH, CASE, "telegram: drafts per answer", round(median(every("drafts", "drafts")))),
        row(BENCH, CASE, "telegram: CPU per message", round(cpu("drafts"), 1), "ms"),
        row(
            BENCH, CASE, "telegram, STREAMING=false: CPU per message", round(cpu("single"), 1), "ms"
        ),
        row(
            BENCH,
            CASE,
            "telegram: drafts / single CPU",
            round(cpu("drafts") / cpu("single"), 2),
            "x",
        ),
    ]
    return rows, {"concurrent": len(chats), "rounds": rounds, "runs": runs}
