"""Tools from MCP servers: what a call through a stdio server and through Streamable HTTP adds
to the same call of a built-in tool.

Each case is a real `membot run` process against the bench's fake Telegram and fake model
(in this process), `LOG_LEVEL=INFO`, `STREAMING=false`. Every message in one private chat,
one after another, makes the model call one tool (the fake answers the first request with
the call, the second with the answer): the built-in `calculate("2+40")`, or `add(a=2, b=40)`
of the SDK-written fake server (tests/fakes/mcp_servers.py), run by membot as a child process
(stdio) or started here on 127.0.0.1 (Streamable HTTP). The three processes run side by side,
each on fakes of its own, and take turns message by message. Figures per message, after a
warm-up:

- the tool call's own duration, as membot's executor logs it (`tool NAME: ... duration=`,
  a millisecond resolution), p50 and p99, and what MCP adds to the built-in's;
- the whole message (update pushed to answer received), p50 and p99;
- CPU per message of membot's process (from /proc), and what MCP adds per call; the server's
  own CPU per call (the stdio child, the HTTP process) beside it. The fakes' CPU is in
  neither: they run here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.fakes import Reply, without_now
from tests.fakes.process import spawn_membot

from bench.child import cpu_seconds
from bench.core import Row, TimedTelegram, fakes, free_port, percentile, process_env, row

BENCH = "mcp"
CHAT = 7001
ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT = 60.0
_DURATION = re.compile(r"tool (\S+): .* duration=([0-9.]+)s")
CASES = ("built-in", "stdio", "http")
TOOL = {"built-in": "calculate", "stdio": "fake_add", "http": "fake_add"}
ARGUMENTS = {"calculate": {"expression": "2+40"}, "fake_add": {"a": 2, "b": 40}}


def _children(pid: int) -> list[int]:
    """The live children of `pid` (the stdio server membot started)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found.extend(int(c) for c in (task / "children").read_text().split())
    return found


def _responder(tool: str) -> Any:
    def respond(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if messages[-1]["role"] == "tool":
            user = next(m for m in reversed(messages) if m["role"] == "user")
            return Reply(content=f"ANSWER: {without_now(str(user['content']))}")
        call = {"function": {"name": tool, "arguments": json.dumps(ARGUMENTS[tool])}}
        return Reply(content=None, tool_calls=[call])

    return respond


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


@contextlib.asynccontextmanager
async def _http_server() -> AsyncIterator[tuple[str, int]]:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.fakes.mcp_servers", "--http", str(port)),
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while not _listening(port):
            if time.monotonic() > deadline:
                raise RuntimeError("mcp bench: the HTTP server did not start")
            await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", proc.pid
    finally:
        proc.kill()
        await proc.wait()


@contextlib.asynccontextmanager
async def _membot(case: str) -> AsyncIterator[tuple[TimedTelegram, int, int | None, Path]]:
    """A membot process of `case` on fakes of its own: (its Telegram, its pid, the MCP
    server's pid, its log)."""
    async with contextlib.AsyncExitStack() as stack:
        tg, llm = await stack.enter_async_context(fakes())
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="membot-bench-mcp-")))
        server_pid: int | None = None
        settings: dict[str, Any] = {}
        if case == "stdio":
            entry: dict[str, Any] = {
                "command": sys.executable,
                "args": ["-m", "tests.fakes.mcp_servers"],
                "cwd": str(ROOT),
            }
        elif case == "http":
            url, server_pid = await stack.enter_async_context(_http_server())
            entry = {"url": url}
        if case != "built-in":
            config = tmp / "mcp.json"
            config.write_text(json.dumps({"mcpServers": {"fake": entry}}))
            settings = {"mcp_config": config, "mcp_public": "fake"}
        llm.set_responder(_responder(TOOL[case]))
        env = process_env(
            tg,
            llm.base_url,
            data_dir=tmp / "data",
            log_level="INFO",
            streaming="false",
            summary_every=10_000,
            **settings,
        )
        log = tmp / "membot.stderr"
        out = stack.enter_context(log.open("wb"))
        polls = tg.call_count("getUpdates")
        proc = await spawn_membot(tmp, env, "run", stdout=out, stderr=out)
        try:
            await tg.wait_for_call("getUpdates", timeout=READY_TIMEOUT, count=polls + 1)
            if case == "stdio":
                server_pid = _children(proc.pid)[0]
            yield tg, proc.pid, server_pid, log
        finally:
            proc.terminate()
            await proc.wait()


async def _measure(warm: int, count: int) -> dict[str, dict[str, Any]]:
    """The three cases side by side, a message each in turn: a noisy machine's slow moments
    fall on all of them alike."""
    async with contextlib.AsyncExitStack() as stack:
        bots = {case: await stack.enter_async_context(_membot(case)) for case in CASES}
        for n in range(warm):
            for tg, *_ in bots.values():
                await tg.ask(CHAT, f"warm-up {n}: add 2 and 40")
        logged = {case: len(_durations(log, TOOL[case])) for case, (*_, log) in bots.items()}
        cpu = {case: _cpu(pid, server) for case, (_, pid, server, _) in bots.items()}
        latencies: dict[str, list[float]] = {case: [] for case in CASES}
        for n in range(count):
            for case, (tg, *_) in bots.items():
                latencies[case].append(await tg.ask(CHAT, f"m{n}: add 2 and 40"))
        used = {case: _cpu(pid, server) for case, (_, pid, server, _) in bots.items()}
        results: dict[str, dict[str, Any]] = {}
        for case, (_, _, _, log) in bots.items():
            calls = _durations(log, TOOL[case])[logged[case] :]
            if len(calls) != count:
                raise RuntimeError(f"mcp bench: {len(calls)} calls logged for {count} ({case})")
            results[case] = {
                "messages": count,
                "call_p50_ms": percentile(calls, 50) * 1000,
                "call_p99_ms": percentile(calls, 99) * 1000,
                "message_p50_ms": percentile(latencies[case], 50) * 1000,
                "message_p99_ms": percentile(latencies[case], 99) * 1000,
                "cpu_ms_per_msg": (used[case][0] - cpu[case][0]) * 1000 / count,
                "server_cpu_ms_per_call": (used[case][1] - cpu[case][1]) * 1000 / count,
            }
    return results


def _cpu(pid: int, server: int | None) -> tuple[float, float]:
    return cpu_seconds(pid), cpu_seconds(server) if server is not None else 0.0


def _durations(log: Path, tool: str) -> list[float]:
    found = _DURATION.findall(log.read_text(errors="replace"))
    return [float(seconds) for name, seconds in found if name == tool]


async def run(quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    warm, count = (5, 30) if quick else (20, 200)
    results = await _measure(warm, count)
    base = results["built-in"]
    note = (
        f"{count} messages per case, the cases in turn, each one tool call (built-in "
        "calculate, or the SDK-written server's add), a real membot process per case; call "
        "durations from its log (1 ms resolution); membot's CPU and the server's from /proc"
    )
    rows: list[Row] = []
    for case in CASES:
        r = results[case]
        label = {"built-in": "built-in tool", "stdio": "MCP over stdio", "http": "MCP over HTTP"}
        name = label[case]
        rows += [
            row(BENCH, name, "tool call p50", round(r["call_p50_ms"], 2), "ms", note=note),
            row(BENCH, name, "tool call p99", round(r["call_p99_ms"], 2), "ms"),
            row(BENCH, name, "message p50", round(r["message_p50_ms"], 1), "ms"),
            row(BENCH, name, "message p99", round(r["message_p99_ms"], 1), "ms"),
            row(BENCH, name, "membot CPU per message", round(r["cpu_ms_per_msg"], 2), "ms"),
        ]
        if case == "built-in":
            continue
        rows += [
            row(
                BENCH,
                name,
                "added to the call p50",
                round(r["call_p50_ms"] - base["call_p50_ms"], 2),
                "ms",
            ),
            row(
                BENCH,
                name,
                "added to the call p99",
                round(r["call_p99_ms"] - base["call_p99_ms"], 2),
                "ms",
            ),
            row(
                BENCH,
                name,
                "added to the message p50",
                round(r["message_p50_ms"] - base["message_p50_ms"], 1),
                "ms",
            ),
            row(
                BENCH,
                name,
                "membot CPU added per call",
                round(r["cpu_ms_per_msg"] - base["cpu_ms_per_msg"], 2),
                "ms",
            ),
            row(BENCH, name, "server CPU per call", round(r["server_cpu_ms_per_call"], 2), "ms"),
        ]
    return rows, results
