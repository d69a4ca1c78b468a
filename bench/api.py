"""The HTTP chat API under load: membot's `POST /api/chat` vs a bare aiohttp-to-LLM relay.

50 sessions talk at the same time, each sending its rounds one after another (each waits
for its answer): membot's sessions are consultations of ROUNDS rounds (the first request
creates the session, the others continue it with its `sessionId`), so every request reads
and writes its session's files, builds the round's prompt and declares the tools. The relay
(`Relay` below) is the least such an API can do: parse the JSON body, send the message alone
to the model through the same openai client and aiohttp transport, answer `{"content": ...}`.
Both talk to the same zero-latency fake model; runs alternate (A B A B) so drift hits both
alike, and each figure is the median over the rounds. Latency: request sent -> response read,
at the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from openai import AsyncOpenAI, DefaultAioHttpClient
from tests.fakes import FakeLLM

from bench.core import API_KEY, MODEL, Row, RunStats, api_server, free_port, median, row

BENCH = "api"
SESSIONS = 50
ROUNDS = 4
API_TOKEN = "bench-api-token-0123456789"


class Relay:
    """The floor: JSON in, one model call with the message alone, JSON out."""

    def __init__(self, llm_base_url: str, port: int) -> None:
        self.port = port
        self.client = AsyncOpenAI(
            api_key=API_KEY,
            base_url=llm_base_url,
            max_retries=0,
            http_client=DefaultAioHttpClient(timeout=60.0),
        )
        app = web.Application()
        app.router.add_post("/api/chat", self._chat)
        self.runner = web.AppRunner(app, access_log=None)

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        completion = await self.client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": str(body["message"])}]
        )
        return web.json_response({"content": completion.choices[0].message.content})

    async def start(self) -> None:
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def close(self) -> None:
        await self.runner.cleanup()
        await self.client.close()


async def _load(url: str, sessions: int, rounds: int, tag: str) -> RunStats:
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=sessions)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as http:

        async def one_session(n: int) -> None:
            session_id: str | None = None
            for k in range(rounds):
                body: dict[str, Any] = {"message": f"{tag} s{n} r{k}: what should I train?"}
                if session_id is None:
                    body["maxRounds"] = rounds
                else:
                    body["sessionId"] = session_id
                started = time.perf_counter()
                async with http.post(url, json=body) as response:
                    answer = await response.json()
                    if response.status != 200:
                        raise RuntimeError(f"{response.status}: {answer}")
                latencies.append(time.perf_counter() - started)
                session_id = answer.get("sessionId")

        started = time.perf_counter()
        await asyncio.gather(*(one_session(n) for n in range(sessions)))
        wall = time.perf_counter() - started
    return RunStats(messages=sessions * rounds, wall=wall, latencies=latencies)


@contextlib.asynccontextmanager
async def _relay(llm: FakeLLM) -> AsyncIterator[str]:
    relay = Relay(llm.base_url, free_port())
    await relay.start()
    try:
        yield f"http://127.0.0.1:{relay.port}"
    finally:
        await relay.close()


async def run(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    rounds = 2 if quick else 5
    sessions = 10 if quick else SESSIONS
    runs: dict[str, list[dict[str, float | int]]] = {"relay": [], "membot": []}
    async with FakeLLM(api_key=API_KEY) as llm:
        for i in range(rounds):
            order = ("relay", "membot") if i % 2 == 0 else ("membot", "relay")
            for who in order:
                with tempfile.TemporaryDirectory(prefix="membot-bench-api-") as tmp:
                    data = Path(tmp) / "data"
                    server = (
                        api_server(llm, data, token=API_TOKEN, max_rounds=ROUNDS)
                        if who == "membot"
                        else _relay(llm)
                    )
                    async with server as base:
                        stats = await _load(f"{base}/api/chat", sessions, ROUNDS, f"{who}{i}")
                runs[who].append(stats.to_dict())

    def med(who: str, key: str) -> float:
        return median([float(r[key]) for r in runs[who]])

    case = f"{sessions} sessions x {ROUNDS} rounds, zero-latency model"
    rows: list[Row] = []
    for who in ("relay", "membot"):
        rows.append(row(BENCH, case, f"{who}: requests/s", round(med(who, "msgs_per_s"), 1)))
        rows.append(row(BENCH, case, f"{who}: p50", round(med(who, "p50_ms"), 1), "ms"))
        rows.append(row(BENCH, case, f"{who}: p99", round(med(who, "p99_ms"), 1), "ms"))
    rows.append(
        row(
            BENCH,
            case,
            "membot / relay throughput",
            round(med("membot", "msgs_per_s") / med("relay", "msgs_per_s"), 2),
            "x",
            note="informational: the relay keeps no session, prompt, tools or files",
        )
    )
    return rows, {"sessions": sessions, "rounds_per_session": ROUNDS, "runs": runs}
