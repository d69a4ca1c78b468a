"""Streaming in Telegram: when a private chat sees the first words (the first draft), how many
drafts an answer takes, and what drafts cost membot per message against STREAMING=false.

The same fake model as the API half (bench/stream_model.py: 1,500 characters over 6 s in 150
or 375 chunks, the first after 0.5 s; a plain call gets the whole answer after 6 s). The real
bot runs as a process of its own (`membot run`: polling, files with fsync, the usage ledger;
bench/child.py), the fakes in the bench's. It answers CONCURRENT private chats at once, each
asking one question a round, ROUNDS rounds with STREAMING=true and =false alternately (A B
B A A B B A), each round a fresh process warmed up by one quick answer in every chat. Time to the
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
from bench.core import Row, TimedTelegram, fakes, process_env
from bench.stream_model import CASES, WARM_UP, responder
from bench.stream_rounds import Names, measured
from bench.stream_rounds import rows as stream_rows

CONCURRENT = 10
# Four of each (A B B A A B B A): a round is ten answers, 60-130 ms of membot's CPU, and two
# of each made the ratio at 375 chunks swing 1.79-2.28x from run to run.
ROUNDS = 8
NAMES = Names(
    streamed="drafts",
    plain="single",
    pieces="drafts",
    first="telegram: first draft p50",
    done="telegram: final message p50",
    plain_done="telegram, STREAMING=false: message p50",
    count="telegram: drafts per answer",
    cpu="telegram: CPU per message",
    plain_cpu="telegram, STREAMING=false: CPU per message",
    ratio="telegram: drafts / single CPU",
    per_chunk="telegram: CPU per chunk",
)


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
    return await measured(child, [_ask(tg, chat, f"plan my week ({tag})") for chat in chats])


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
    rows = [r for case in CASES for r in stream_rows(case, runs[case.name], NAMES)]
    return rows, {"concurrent": len(chats), "rounds": rounds, "runs": runs}
