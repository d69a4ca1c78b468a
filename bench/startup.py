"""Start-up: how long the operator commands take from `exec` to exit on a warm install, and
how long `membot run` takes to its first `getUpdates` (the moment it can answer), beside
what importing aiogram alone takes (every aiogram bot pays it first).

Each is the median of several runs of a real process (`python -m membot ...`, bytecode
cached), beside the reference of the same interpreter doing nothing (`python -c pass`),
measured in the same run. The commands need no network: `search` reads a chat of the bench's
own data directory, `usage` its ledger, the bot talks to the fake Telegram of this process.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.core import Row, fakes, process_env, row

BENCH = "startup"
COMMAND_TARGET_S = 0.3
BOT_TARGET_S = 2.0


async def _wall(args: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *args,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    await proc.wait()
    return time.perf_counter() - started


async def _seed(data_dir: Path) -> None:
    from membot.ids import ConversationId
    from membot.memory import FileRepository, Message

    repo = FileRepository(data_dir)
    await repo.append(
        ConversationId.telegram(42),
        [Message(role="user", content="the spare key is under the blue pot")],
    )


async def _first_poll(tg: Any, env: dict[str, str], cwd: Path) -> float:
    polls = tg.call_count("getUpdates")
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "membot",
        "run",
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await tg.wait_for_call("getUpdates", timeout=60, count=polls + 1)
        return time.perf_counter() - started
    finally:
        proc.terminate()
        await proc.wait()


async def run(quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    runs = 3 if quick else 7
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="membot-bench-startup-") as tmp:
        cwd = Path(tmp)
        data_dir = cwd / "data"
        await _seed(data_dir)
        async with fakes() as (tg, llm):
            env = process_env(tg, llm.base_url, data_dir=data_dir)
            # A warm install has its bytecode: let the warm-up runs write it even where the
            # environment says not to (a modified source would be compiled on every run).
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            membot = [sys.executable, "-m", "membot"]
            cases = {
                "python -c pass (reference)": [sys.executable, "-c", "pass"],
                # What any aiogram bot pays before it can poll: aiogram builds the pydantic
                # models of every Bot API type at import (most of it in aiogram.types).
                "import aiogram (reference)": [sys.executable, "-c", "import aiogram"],
                # What any command that reads the settings pays (pydantic and its settings).
                "import pydantic_settings (reference)": [
                    sys.executable,
                    "-c",
                    "import pydantic_settings",
                ],
                "membot --help": [*membot, "--help"],
                "membot check-config": [*membot, "check-config"],
                "membot search": [*membot, "search", "42", "spare key"],
                "membot usage": [*membot, "usage"],
            }
            for args in cases.values():
                await _wall(args, env, cwd)  # warm: bytecode written, files in the page cache
            # Round-robin, not one case after another: the machine's speed drifts, and each
            # case's median should come from the same stretch of time as the references'.
            samples: dict[str, list[float]] = {name: [] for name in cases}
            polls: list[float] = []
            for n in range(runs):
                for name, args in cases.items():
                    samples[name].append(await _wall(args, env, cwd))
                if n < (3 if quick else 5):
                    polls.append(await _first_poll(tg, env, cwd))
            for name, taken in samples.items():
                raw[name] = taken
                median = statistics.median(taken)
                reference = name.endswith("(reference)")
                rows.append(
                    row(
                        BENCH,
                        name,
                        "wall time (median)",
                        round(median, 3),
                        "s",
                        target="" if reference else f"< {COMMAND_TARGET_S} s",
                        ok=None if reference else median < COMMAND_TARGET_S,
                        note=f"median of {runs} runs of a real process, warm install",
                    )
                )
            raw["membot run: first getUpdates"] = polls
            median = statistics.median(polls)
            rows.append(
                row(
                    BENCH,
                    "membot run",
                    "exec to first getUpdates (median)",
                    round(median, 3),
                    "s",
                    target=f"< {BOT_TARGET_S} s",
                    ok=median < BOT_TARGET_S,
                )
            )
    return rows, raw
