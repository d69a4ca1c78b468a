"""Streaming over the HTTP API: what a client waits for the first words, and what streaming
costs membot per message; then the same in Telegram's private chats (bench/stream_telegram.py).

A fake model writes a 1,500-character answer over 6 s: its first piece after 0.5 s, the
rest spread evenly over the remaining 5.5 s, in 150 chunks or in 375 (bench/stream_model.py;
a plain call gets the whole answer after the same 6 s). membot's API runs as a process of
its own (`membot api`: files with fsync, the usage ledger; bench/child.py), the fake model and
the client in the bench's. It answers CONCURRENT new requests at once, alternately streamed
(`"stream": true`: time to the first `delta` event and to `done`, at the client) and plain
(time to the JSON answer), ROUNDS times each (A B B A ...), after a warm-up round of each;
medians over every message. CPU per message is membot's process's over a round, nothing of
the fakes' or the client's; CPU per chunk is what a streamed message costs beyond a plain
one, over its chunks.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from tests.fakes import FakeLLM
from tests.fakes.process import membot_env

from bench import stream_telegram
from bench.child import Child, membot_child
from bench.core import API_KEY, MODEL, Row, free_port
from bench.stream_model import CASES, WARM_UP, responder
from bench.stream_rounds import Names, measured
from bench.stream_rounds import rows as stream_rows

API_TOKEN = "bench-stream-token-0123456789"
CONCURRENT = 10
ROUNDS = 4  # of each, streamed and plain


async def _one(http: aiohttp.ClientSession, url: str, text: str, stream: bool) -> dict[str, float]:
    body: dict[str, Any] = {"message": text, "stream": stream}
    started = time.perf_counter()
    first: float | None = None
    deltas = 0
    async with http.post(url, json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"{response.status}: {await response.text()}")
        if not stream:
            await response.json()
        else:
            async for line in response.content:
                if line.startswith(b"event: delta"):
                    deltas += 1
                    if first is None:
                        first = time.perf_counter() - started
    done = time.perf_counter() - started
    return {"first": first if first is not None else done, "done": done, "deltas": deltas}


async def _round(
    http: aiohttp.ClientSession, url: str, child: Child, stream: bool, count: int, tag: str
) -> dict[str, Any]:
    asks = [_one(http, url, f"plan my week ({tag} {n})", stream) for n in range(count)]
    return {"stream": stream, **await measured(child, asks)}


async def _healthy(http: aiohttp.ClientSession, base: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            async with http.get(f"{base}/healthz") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.05)  # polling a starting process, not synchronising with it


async def _api(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    rounds = 1 if quick else ROUNDS
    count = 4 if quick else CONCURRENT
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    async with FakeLLM(api_key=API_KEY) as llm:
        with tempfile.TemporaryDirectory(prefix="membot-bench-stream-") as tmp:
            port = free_port()
            env = membot_env(
                openrouter_api_key=API_KEY,
                openrouter_base_url=llm.base_url,
                openrouter_model=MODEL,
                data_dir=str(Path(tmp) / "data"),
                api_port=str(port),
                api_tokens=API_TOKEN,
                llm_timeout="60",
                log_level="WARNING",
            )
            base = f"http://127.0.0.1:{port}"
            headers = {"Authorization": f"Bearer {API_TOKEN}"}
            async with (
                aiohttp.ClientSession(headers=headers) as http,
                membot_child("api", env, Path(tmp), lambda: _healthy(http, base)) as child,
            ):
                url = f"{base}/api/chat"
                for case in CASES:
                    llm.set_responder(responder(case))
                    per_case = runs.setdefault(case.name, {"stream": [], "plain": []})
                    for stream in (True, False):  # connections, lazily built parts
                        await _round(http, url, child, stream, count, WARM_UP)
                    for i in range(rounds):
                        for stream in (True, False) if i % 2 == 0 else (False, True):
                            result = await _round(http, url, child, stream, count, f"r{i}")
                            per_case["stream" if stream else "plain"].append(result)
    rows = [r for case in CASES for r in stream_rows(case, runs[case.name], NAMES)]
    return rows, {"concurrent": count, "rounds": rounds, "runs": runs}


NAMES = Names(
    streamed="stream",
    plain="plain",
    pieces="deltas",
    first="streamed: first delta p50",
    done="streamed: done p50",
    plain_done="plain: answer p50",
    count="streamed: deltas per answer",
    cpu="streamed: CPU per message",
    plain_cpu="plain: CPU per message",
    ratio="streamed / plain: CPU",
    per_chunk="streamed: CPU per chunk",
)


async def run(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    api_rows, api_raw = await _api(quick)
    telegram_rows, telegram_raw = await stream_telegram.run(quick)
    return api_rows + telegram_rows, {**api_raw, "telegram": telegram_raw}
