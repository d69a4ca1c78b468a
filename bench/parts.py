"""Where membot's CPU per message goes, part by part.

One chat sends messages one after another to membot (files, its defaults, a zero-latency
model) under cProfile; each part's cumulative time per message is reported, and its share
of the process's CPU over the same messages (bot and fakes together, as in `overhead`).
The profiler slows everything by a similar factor, so the shares are what to read: which
parts a saving must come from. Parts nest in places (the model call includes its usage
record; the whole turn includes most others). cProfile sees the event loop's thread only:
the file work done in worker threads (the reads, the appends and their fdatasync) is in the
process's CPU but not in its parts, which is why "context read" and "append" look free.
"""

from __future__ import annotations

import cProfile
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.core import Row, drive, fakes, make_membot, row, running

BENCH = "parts"

# (label, file suffix, function name, what it is)
PARTS: tuple[tuple[str, str, str, str], ...] = (
    ("whole turn", "core/agent.py", "respond", "context read to answer sent"),
    ("context read", "memory/files/repository.py", "context", "the window, summary, facts, meta"),
    (
        "append (fdatasync)",
        "memory/files/repository.py",
        "append",
        "the turn and its state, durable",
    ),
    ("prompt", "core/prompt.py", "build", "system prompt with facts and tools, the window"),
    ("model call", "llm/client.py", "complete", "the openai client, request to parsed reply"),
    ("usage record", "usage/files.py", "record", "the charge, counted and queued"),
    ("render", "bot/render.py", "render", "Markdown to Telegram entities"),
    ("send", "bot/render.py", "send_markdown", "sendMessage, paced"),
    ("pacing", "membot/bot/limits.py", "acquire", "Telegram's limits (GCRA)"),
    ("typing", "aiogram/utils/chat_action.py", "__aenter__", "the typing indicator starts"),
    ("summary", "core/summarizer.py", "maybe_summarize", "one summary per 20 messages"),
)


async def run(quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    messages = 60 if quick else 300
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="membot-bench-parts-") as tmp:
        async with fakes() as (tg, llm):
            app = make_membot(tg, llm, Path(tmp) / "data")
            async with running(app, tg):
                await drive(tg, [1], 20, "warm")
                profile = cProfile.Profile()
                cpu = time.process_time()
                profile.enable()
                await drive(tg, [1], messages, "parts")
                profile.disable()
                total_ms = (time.process_time() - cpu) * 1000
    stats = pstats.Stats(profile)
    table: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    note = f"{messages} messages, 1 chat, under cProfile: read the shares"
    rows.append(
        row(BENCH, "process", "CPU per message", round(total_ms / messages, 2), "ms", note=note)
    )
    for label, suffix, name, what in PARTS:
        cumulative = sum(
            entry[3]
            for (path, _, func), entry in table.items()
            if path.endswith(suffix) and func == name
        )
        per_message = cumulative * 1000 / messages
        raw[label] = round(per_message, 3)
        rows.append(row(BENCH, label, "ms per message", round(per_message, 3), "ms", note=what))
        rows.append(
            row(BENCH, label, "share of CPU", round(per_message / (total_ms / messages), 3), "x")
        )
    return rows, raw
