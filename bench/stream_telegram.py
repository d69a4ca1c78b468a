"""Streaming in Telegram: when a private chat sees the first words (the first draft), how many
drafts an answer takes, and what drafts cost membot per message against STREAMING=false.

The same fake model as the API half (bench/stream_model.py: 1,500 characters over 6 s in 150
or 375 chunks, the first after 0.5 s; a plain call gets the whole answer after 6 s). The real
bot runs as a process of its own (`membot run`: polling, files with fsync, the usage ledger;
bench/child.py), the fakes in the bench's. It answers CONCURRENT private chats at once, each
asking one question a round, ROUNDS rounds with STREAMING=true and =false alternately (A B
B A), each round a fresh process warmed up by one quick answer in every chat. Time to the
first draft and to the final message are taken at the fake Bot API from when the update was
pushed; medians over every message. CPU per message is membot's process's over a round,
nothing of the fakes'; CPU per chunk is what a message with drafts costs beyond one without,
over its chunks."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.child import Child, membot_child
from bench.core import Row, TimedTelegram, fakes, median, process_env, row
from bench.stream_model import CASES, WARM_UP, Case, responder

BENCH = "stream"
CONCURRENT = 10
ROUNDS = 4  # two of each
TARGET_FIRST = 1.0
TARGET_RATIO = 2.0


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


async def _round(tg: TimedTelegram, child: Child, chats: range, tag: str) -> dict[str, Any]:
    cpu = child.cpu()
    results = await asyncio.gather(*(_ask(tg, chat, f"plan my week ({tag})") for chat in chats))
    cpu_ms = (child.cpu() - cpu) * 1000 / len(chats)
    return {"messages": results, "cpu_ms_per_msg": cpu_ms}


async def run(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    rounds = 2 if quick else ROUNDS
    chats = range(7001, 7001 + (4 if quick else CONCURRENT))
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="membot-bench-drafts-") as tmp:
        async with fakes() as (tg, llm):
            for case in CASES:
                llm.set_responder(responder(case))
                per_case = runs.setdefault(case.name, {"drafts": [], "single": []})
                for i in range(rounds):
                    streaming = i % 4 in (0, 3)
                    data = Path(tmp) / f"data-{case.chunks}-{i}"
                    env = process_env(tg, llm.base_url, data_dir=data, streaming=streaming)
                    polls = tg.call_count("getUpdates")

                    async def polling(polls: int = polls) -> None:
                        await tg.wait_for_call("getUpdates", timeout=60, count=polls + 1)

                    async with membot_child("run", env, Path(tmp), polling) as child:
                        await asyncio.gather(*(_ask(tg, chat, WARM_UP) for chat in chats))
                        result = await _round(tg, child, chats, f"r{i}")
                    per_case["drafts" if streaming else "single"].append(result)
    rows = [r for case in CASES for r in _rows(case, runs[case.name])]
    return rows, {"concurrent": len(chats), "rounds": rounds, "runs": runs}


def _rows(case: Case, runs: dict[str, list[dict[str, Any]]]) -> list[Row]:
    def every(who: str, key: str) -> list[float]:
        return [float(m[key]) for r in runs[who] for m in r["messages"]]

    def cpu(who: str) -> list[float]:
        return [float(r["cpu_ms_per_msg"]) for r in runs[who]]

    first = median(every("drafts", "first"))
    drafts, single = median(cpu("drafts")), median(cpu("single"))
    ratio = median([d / s for d, s in zip(cpu("drafts"), cpu("single"), strict=True)])
    per_chunk = (drafts - single) * 1000 / case.chunks
    name = case.name
    return [
        row(
            BENCH,
            name,
            "telegram: first draft p50",
            round(first, 3),
            "s",
            target=f"<= {TARGET_FIRST}",
            ok=first <= TARGET_FIRST,
        ),
        row(
            BENCH,
            name,
            "telegram: final message p50",
            round(median(every("drafts", "done")), 3),
            "s",
        ),
        row(
            BENCH,
            name,
            "telegram, STREAMING=false: message p50",
            round(median(every("single", "done")), 3),
            "s",
        ),
        row(BENCH, name, "telegram: drafts per answer", round(median(every("drafts", "drafts")))),
        row(BENCH, name, "telegram: CPU per message", round(drafts, 2), "ms"),
        row(BENCH, name, "telegram, STREAMING=false: CPU per message", round(single, 2), "ms"),
        row(
            BENCH,
            name,
            "telegram: drafts / single CPU",
            round(ratio, 2),
            "x",
            target=f"<= {TARGET_RATIO}",
            ok=ratio <= TARGET_RATIO,
        ),
        row(BENCH, name, "telegram: CPU per chunk", round(per_chunk, 1), "µs"),
    ]
