"""The OpenAI-compatible endpoint: `POST /v1/chat/completions` against `POST /api/chat`.

Load: 50 users at the same time, each sending ROUNDS messages one after another (each waits
for its answer), to one membot API server over a zero-latency fake model. On /api/chat a
user is a session, a consultation of ROUNDS rounds (its first request opens it, the others
name its `sessionId`), as in bench/api.py; on /v1 a user is a `user` of its own that sends,
as OpenAI's clients do, its whole history each time (the last message is the new one).
Runs alternate (A B A B) so drift hits both alike; each figure is the median over the runs;
latency is request sent -> response read, at the client (plain aiohttp for both).

History: one client sends 100 messages to /v1, each time with its whole growing history, and
the same 100 messages go to one /api/chat session of 100 rounds (MAX_ROUNDS=100). For each
answer, the characters of the prompt the model was sent (the fake's rendering: tools, then
each message). membot builds the prompt from its own memory (window, summary, facts), not
from what the client resent, so it stays flat while the client's body grows: judged as the
mean over the last 20 answers against the mean over answers 21-40 (after the first summary).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from tests.fakes import FakeLLM
from tests.fakes.openai_server import rendered_prompt

from bench.core import API_KEY, SUMMARIZER_MARKER, Row, RunStats, api_server, median, row

BENCH = "v1"
USERS = 50
ROUNDS = 4
TURNS = 100
API_TOKEN = "bench-api-token-0123456789"
AUTH = {"Authorization": f"Bearer {API_TOKEN}"}
FLAT_TARGET = 1.2
RATIO_TARGET = 0.9


def _message(user: int, k: int) -> str:
    return f"u{user} m{k}: what should I train today, and for how long? " * 3


async def _post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(url, json=body) as response:
        answer: dict[str, Any] = await response.json()
        if response.status != 200:
            raise RuntimeError(f"{response.status}: {answer}")
    return answer


async def _api_user(http: aiohttp.ClientSession, base: str, n: int, rounds: int) -> list[float]:
    latencies, session_id = [], None
    for k in range(rounds):
        body: dict[str, Any] = {"message": _message(n, k)}
        if session_id is None:
            body["maxRounds"] = rounds
        else:
            body["sessionId"] = session_id
        started = time.perf_counter()
        answer = await _post(http, f"{base}/api/chat", body)
        latencies.append(time.perf_counter() - started)
        session_id = answer["sessionId"]
    return latencies


async def _v1_user(http: aiohttp.ClientSession, base: str, n: int, rounds: int) -> list[float]:
    latencies, history = [], []
    for k in range(rounds):
        history.append({"role": "user", "content": _message(n, k)})
        body = {"model": "membot", "messages": history, "user": f"user-{n}"}
        started = time.perf_counter()
        answer = await _post(http, f"{base}/v1/chat/completions", body)
        latencies.append(time.perf_counter() - started)
        history.append(answer["choices"][0]["message"])
    return latencies


async def _load(llm: FakeLLM, who: str, users: int) -> RunStats:
    user = _v1_user if who == "v1" else _api_user
    with tempfile.TemporaryDirectory(prefix="membot-bench-v1-") as tmp:
        async with api_server(llm, Path(tmp) / "data", token=API_TOKEN, max_rounds=ROUNDS) as base:
            connector = aiohttp.TCPConnector(limit=users)
            async with aiohttp.ClientSession(connector=connector, headers=AUTH) as http:
                started = time.perf_counter()
                done = await asyncio.gather(*(user(http, base, n, ROUNDS) for n in range(users)))
                wall = time.perf_counter() - started
    latencies = [s for one in done for s in one]
    return RunStats(messages=len(latencies), wall=wall, latencies=latencies)


async def _history(llm: FakeLLM, turns: int) -> dict[str, list[int]]:
    """Prompt characters per answer, and the client's body, for `turns` messages."""
    out: dict[str, list[int]] = {"v1": [], "api": [], "v1_body": []}
    with tempfile.TemporaryDirectory(prefix="membot-bench-v1-history-") as tmp:
        async with (
            api_server(llm, Path(tmp) / "data", token=API_TOKEN, max_rounds=turns) as base,
            aiohttp.ClientSession(headers=AUTH) as http,
        ):
            history: list[dict[str, Any]] = []
            session_id = None
            for k in range(turns):
                text = _message(0, k)
                history.append({"role": "user", "content": text})
                body = {"model": "membot", "messages": history, "user": "history"}
                out["v1_body"].append(len(str(history)))
                seen = len(llm.chat_requests)
                answer = await _post(http, f"{base}/v1/chat/completions", body)
                history.append(answer["choices"][0]["message"])
                out["v1"].append(_prompt_chars(llm, seen))
                asked: dict[str, Any] = {"message": text}
                if session_id is None:
                    asked["maxRounds"] = turns
                else:
                    asked["sessionId"] = session_id
                seen = len(llm.chat_requests)
                session_id = (await _post(http, f"{base}/api/chat", asked))["sessionId"]
                out["api"].append(_prompt_chars(llm, seen))
    return out


def _prompt_chars(llm: FakeLLM, seen: int) -> int:
    """The answer's prompt (its last model call; a tool step would make more)."""
    return len(rendered_prompt(llm.chat_requests[-1])) if len(llm.chat_requests) > seen else 0


def _flatness(chars: list[int]) -> float:
    """Mean over the last 20 answers / mean over answers 21-40."""
    late, early = chars[-20:], chars[20:40]
    return (sum(late) / len(late)) / (sum(early) / len(early))


async def run(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    repeats = 2 if quick else 5
    users = 10 if quick else USERS
    turns = 60 if quick else TURNS
    runs: dict[str, list[dict[str, float | int]]] = {"api": [], "v1": []}
    async with FakeLLM(api_key=API_KEY) as llm:
        llm.summary_marker = SUMMARIZER_MARKER  # the summarizer's own words mark its calls
        for i in range(repeats):
            for who in ("api", "v1") if i % 2 == 0 else ("v1", "api"):
                runs[who].append((await _load(llm, who, users)).to_dict())
        history = await _history(llm, turns)

    def med(who: str, key: str) -> float:
        return median([float(r[key]) for r in runs[who]])

    case = f"{users} users x {ROUNDS} messages, zero-latency model"
    rows: list[Row] = []
    for who, name in (("api", "/api/chat"), ("v1", "/v1")):
        rows.append(row(BENCH, case, f"{name}: requests/s", round(med(who, "msgs_per_s"), 1)))
        rows.append(row(BENCH, case, f"{name}: p50", round(med(who, "p50_ms"), 1), "ms"))
        rows.append(row(BENCH, case, f"{name}: p99", round(med(who, "p99_ms"), 1), "ms"))
    ratio = med("v1", "msgs_per_s") / med("api", "msgs_per_s")
    rows.append(
        row(
            BENCH,
            case,
            "/v1 / /api/chat throughput",
            round(ratio, 2),
            "x",
            target=f">= {RATIO_TARGET}",
        )
    )
    case = f"one client, {turns} messages, its whole history resent"
    v1, api, body = history["v1"], history["api"], history["v1_body"]
    rows.append(row(BENCH, case, "/v1: prompt chars, answers 21-40", round(sum(v1[20:40]) / 20)))
    rows.append(row(BENCH, case, "/v1: prompt chars, last 20", round(sum(v1[-20:]) / 20)))
    rows.append(row(BENCH, case, "/api/chat: prompt chars, last 20", round(sum(api[-20:]) / 20)))
    rows.append(
        row(
            BENCH,
            case,
            "/v1 prompt growth",
            round(_flatness(v1), 2),
            "x",
            target=f"<= {FLAT_TARGET}",
        )
    )
    rows.append(row(BENCH, case, "/api/chat prompt growth", round(_flatness(api), 2), "x"))
    rows.append(
        row(
            BENCH,
            case,
            "client body growth",
            round(_flatness(body), 2),
            "x",
            note="informational: what the client resends grows with every turn",
        )
    )
    return rows, {"users": users, "rounds": ROUNDS, "runs": runs, "history": history}
