"""Export of a long chat: how long `GET /api/sessions/{id}/export` takes and the peak resident
memory of the process that builds it, for a chat of 100,000 messages and 200 files against a
small one (1,000 messages, 10 files). The export is the same code as Telegram's /export
(membot.export); the API's one ZIP is its whole output.

Each case is an API session written under a DATA_DIR of its own through FileRepository (the
files backend; turns of 1,000 messages per append, images of 150 KB of random bytes, which do
not compress), then a `membot api` process of its own (bench/child.py) is started on it. Its
peak resident memory (VmHWM) is reset once it is up (/proc/<pid>/clear_refs), the export is
fetched and written to a file here, and the peak read again: the process's own figure, with
the ZIP streamed out as it was built. The ZIP is read back: its messages.jsonl has every
message, its files/ every file. Linux only (/proc)."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
import zipfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp

from bench.child import membot_child
from bench.core import Row, fakes, free_port, peak_rss_mib, process_env, row
from membot.clock import utc_now
from membot.ids import ConversationId
from membot.memory import FileRepository, Message
from membot.memory.contract.attachment import Attachment, new_file_key
from membot.memory.contract.state import ConversationState, SessionConfig

BENCH = "export"
TOKEN = "bench-export-token-0123456789"
RATIO_TARGET = 1.2
BATCH = 1_000
IMAGE = 150 * 1024
WORDS = "the quick brown fox jumps over the lazy dog and then some more words follow "


async def fill(data_dir: Path, messages: int, files: int) -> str:
    """An API session of `messages` messages, `files` of them with an image; its id."""
    sid = str(uuid.uuid4())
    cid = ConversationId.api(sid)
    repo = FileRepository(data_dir)
    now = utc_now()
    every = max(1, messages // max(files, 1))
    state = ConversationState(round=1, max_rounds=1, complete=True, session=SessionConfig())
    for start in range(0, messages, BATCH):
        batch = []
        for n in range(start, min(start + BATCH, messages)):
            attachments: tuple[Attachment, ...] = ()
            if n % every == 0 and n // every < files:
                key = new_file_key("jpg")
                await repo.put_file(cid, key, os.urandom(IMAGE))
                attachments = (Attachment(kind="image", file=key, size=IMAGE),)
            role = "user" if n % 2 == 0 else "assistant"
            text = f"message {n}: " + WORDS * (1 + n % 4)
            ts = now - timedelta(seconds=messages - n)
            batch.append(Message(role=role, content=text, ts=ts, attachments=attachments))
        await repo.append(cid, batch, state=state if start == 0 else None)
    await repo.close()
    return sid


def _status_mib(pid: int, key: str) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} for {pid}")


def _check(path: Path, messages: int, files: int) -> None:
    with zipfile.ZipFile(path) as zf:
        with zf.open("messages.jsonl") as lines:
            count = sum(1 for _ in lines)
        kept = sum(1 for name in zf.namelist() if name.startswith("files/"))
    if (count, kept) != (messages, files):
        raise RuntimeError(f"export bench: {count} messages, {kept} files in the ZIP")


async def measure(root: Path, messages: int, files: int) -> dict[str, Any]:
    data_dir = root / f"data-{messages}"
    began = time.perf_counter()
    sid = await fill(data_dir, messages, files)
    filled = time.perf_counter() - began
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    out = root / f"export-{messages}.zip"
    async with fakes() as (tg, llm), aiohttp.ClientSession() as http:

        async def ready() -> None:
            while True:
                try:
                    async with http.get(f"{base}/healthz") as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)

        env = process_env(tg, llm.base_url, data_dir=data_dir, api_port=port, api_tokens=TOKEN)
        async with membot_child("api", env, root, ready) as child:
            idle = _status_mib(child.pid, "VmRSS")
            Path(f"/proc/{child.pid}/clear_refs").write_text("5")  # the peak from here
            cpu = child.cpu()
            started = time.perf_counter()
            url = f"{base}/api/sessions/{sid}/export"
            async with http.get(url, headers=auth) as response:
                if response.status != 200:
                    raise RuntimeError(f"export bench: {response.status} {await response.text()}")
                with out.open("wb") as fh:
                    async for chunk in response.content.iter_chunked(1 << 20):
                        fh.write(chunk)
            took = time.perf_counter() - started
            used = child.cpu() - cpu
            peak = peak_rss_mib(child.pid)
    _check(out, messages, files)
    size = out.stat().st_size
    out.unlink()
    return {
        "messages": messages,
        "files": files,
        "fill_s": round(filled, 2),
        "export_s": round(took, 3),
        "cpu_s": round(used, 3),
        "zip_mib": round(size / (1 << 20), 1),
        "idle_rss_mib": round(idle, 1),
        "peak_rss_mib": round(peak, 1),
        "peak_above_idle_mib": round(peak - idle, 1),
    }


async def run(quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    large = (20_000, 50) if quick else (100_000, 200)
    cases = {"small chat": (1_000, 10), "large chat": large}
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="membot-bench-export-") as tmp:
        for case, (messages, files) in cases.items():
            results[case] = await measure(Path(tmp), messages, files)
    small, big = results["small chat"], results["large chat"]
    note = (
        f"GET /api/sessions/{{id}}/export of a files-backend session, a `membot api` process "
        f"per case; peak RSS is the process's VmHWM, reset once it was up; images of "
        f"{IMAGE // 1024} KB of random bytes"
    )
    rows: list[Row] = []
    for case, r in results.items():
        rows += [
            row(BENCH, case, "messages", r["messages"], "msgs", note=note if not rows else ""),
            row(BENCH, case, "files", r["files"]),
            row(BENCH, case, "export time", r["export_s"], "s"),
            row(BENCH, case, "CPU", r["cpu_s"], "s"),
            row(BENCH, case, "ZIP size", r["zip_mib"], "MiB"),
            row(BENCH, case, "peak RSS", r["peak_rss_mib"], "MiB"),
            row(BENCH, case, "peak RSS above the idle process", r["peak_above_idle_mib"], "MiB"),
        ]
    ratio = round(big["peak_rss_mib"] / small["peak_rss_mib"], 3)
    rows.append(
        row(
            BENCH,
            "large / small",
            "peak RSS",
            ratio,
            "x",
            target=f"<= {RATIO_TARGET}",
            ok=ratio <= RATIO_TARGET,
        )
    )
    speed = big["messages"] / big["export_s"] if big["export_s"] else 0.0
    rows.append(row(BENCH, "large chat", "messages per second", round(speed), "msgs"))
    return rows, results
