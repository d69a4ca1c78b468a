"""Streaming over the HTTP API: what a client waits for the first words, and what streaming
costs membot per message; then the same in Telegram's private chats (bench/stream_telegram.py).

A fake model writes a 1,500-character answer over 6 s: its first piece after 0.5 s, the
rest in 10-character pieces spread evenly over the remaining 5.5 s (a plain call gets the
whole answer after the same 6 s). membot's real API and core (files with fsync, the usage
ledger) answer CONCURRENT new requests at once, alternately streamed (`"stream": true`:
time to the first `delta` event and to `done`, at the client) and plain (time to the JSON
answer), ROUNDS times each (A B A B), and the medians are taken over every message. CPU per
message is the process's over a round (API, core, client and fake model together, so the
fake's own chunking is in the streamed figure too).
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from tests.fakes import FakeLLM

from bench import stream_telegram
from bench.core import API_KEY, MODEL, Row, median, row
from bench.stream_model import CASE, reply
from membot.api.server import ApiServer
from membot.config import load_settings
from membot.wiring import build_core

BENCH = "stream"
API_TOKEN = "bench-stream-token-0123456789"
CONCURRENT = 10
ROUNDS = 3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _one(http: aiohttp.ClientSession, url: str, n: int, stream: bool) -> dict[str, float]:
    body: dict[str, Any] = {"message": f"plan my week ({n})", "stream": stream}
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


async def _round(http: aiohttp.ClientSession, url: str, stream: bool, count: int) -> dict[str, Any]:
    cpu = time.process_time()
    results = await asyncio.gather(*(_one(http, url, n, stream) for n in range(count)))
    return {
        "stream": stream,
        "messages": results,
        "cpu_ms_per_msg": (time.process_time() - cpu) * 1000 / count,
    }


async def run(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    rounds = 1 if quick else ROUNDS
    count = 4 if quick else CONCURRENT
    runs: dict[str, list[dict[str, Any]]] = {"stream": [], "plain": []}
    async with FakeLLM(api_key=API_KEY) as llm:
        llm.set_responder(reply)
        with tempfile.TemporaryDirectory(prefix="membot-bench-stream-") as tmp:
            port = _free_port()
            settings = load_settings(
                _env_file=None,
                telegram=False,
                api=True,
                openrouter_api_key=API_KEY,
                openrouter_base_url=llm.base_url,
                openrouter_model=MODEL,
                data_dir=Path(tmp) / "data",
                api_port=port,
                api_tokens=API_TOKEN,
                llm_timeout=60,
                log_level="WARNING",
            )
            core = build_core(settings)
            server = ApiServer(settings, core)
            await server.start()
            url = f"http://127.0.0.1:{port}/api/chat"
            headers = {"Authorization": f"Bearer {API_TOKEN}"}
            try:
                async with aiohttp.ClientSession(headers=headers) as http:
                    for i in range(rounds):
                        for stream in (True, False) if i % 2 == 0 else (False, True):
                            result = await _round(http, url, stream, count)
                            runs["stream" if stream else "plain"].append(result)
            finally:
                await server.stop_accepting()
                await server.close()
                await core.aclose()

    def every(who: str, key: str) -> list[float]:
        return [float(m[key]) for r in runs[who] for m in r["messages"]]

    def cpu(who: str) -> float:
        return median([float(r["cpu_ms_per_msg"]) for r in runs[who]])

    first = median(every("stream", "first"))
    rows = [
        row(
            BENCH,
            CASE,
            "streamed: first delta p50",
            round(first, 3),
            "s",
            target="<= 1.0",
            ok=first <= 1.0,
        ),
        row(BENCH, CASE, "streamed: done p50", round(median(every("stream", "done")), 3), "s"),
        row(BENCH, CASE, "plain: answer p50", round(median(every("plain", "done")), 3), "s"),
        row(BENCH, CASE, "streamed: deltas per answer", round(median(every("stream", "deltas")))),
        row(BENCH, CASE, "streamed: CPU per message", round(cpu("stream"), 1), "ms"),
        row(BENCH, CASE, "plain: CPU per message", round(cpu("plain"), 1), "ms"),
        row(BENCH, CASE, "streamed / plain: CPU", round(cpu("stream") / cpu("plain"), 2), "x"),
    ]
    telegram_rows, telegram_raw = await stream_telegram.run(quick)
    raw = {"concurrent": count, "rounds": rounds, "runs": runs, "telegram": telegram_raw}
    return rows + telegram_rows, raw
