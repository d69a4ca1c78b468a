"""What a voice message, a photo and a PDF add to a turn, against a text message.

The real core (`build_core`: files backend with fsync, usage ledger, the model catalog and
the transcriber) talks to the fake model, a real HTTP server on 127.0.0.1 that answers chat
calls and transcriptions at once (zero latency): what is measured is membot's own work per
message, the transcription's own time being the endpoint's. Three kinds of message, each
sent through `ConversationService.say` as a front door sends it (the Telegram door
downloads the file first; the API decodes its base64), one after another:

- text: a short question;
- voice: a 3 s Telegram voice (OGG/Opus, made with PyAV), sent as it is to
  /audio/transcriptions (base64 JSON), the transcript charged in the ledger;
- photo: a 1280x960 JPEG (Telegram's usual size), checked and decoded with Pillow, kept as a
  conversation file (fsync'd) and sent as a data URL; later turns of the chat read it back;
- pdf: a 10-page PDF with a text layer (about 8,000 characters), read by pypdf in a child
  process of its own (media/pdf.py), its text kept as a conversation file and indexed.

Each kind has chats of its own (every message to the next one, round robin). Rounds
alternate the order of the kinds; per message: the wall time of the turn (median, p90) and
the CPU of the process (bench, core and fakes together, worker threads included) divided by
the messages. Ratios are voice / text, photo / text and pdf / text within the same run.

Apart, the same PDF read alone, one after another: by the child process (what a turn does)
and by pypdf in a worker thread of this process (what a turn did before the child), the
latency and this process's CPU of each.

Apart too, the memory of image decodes, each case in a process of its own
(bench/image_rss.py, membot's media part built as the wiring builds it): how far the
process's peak resident memory rises while images are prepared, and what it keeps after.
A normal photo (the 1280x960 JPEG, alone and four at once), four 5,000 x 5,000 PNGs at once
(25 megapixels: at MEDIA_MAX_PIXELS, decoded whole, two at a time) and four 7,900 x 7,900
PNGs at once (62 megapixels in about 200 KB: over the bound, refused from the header).
"""

from __future__ import annotations

import asyncio
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.fakes import FakeLLM, media_files

from bench.core import API_KEY, MODEL, Row, percentile, row
from membot.config import load_settings
from membot.core.media import Upload
from membot.core.turn import Incoming, TurnResult
from membot.ids import ConversationId
from membot.media.pdf import PdfProcesses
from membot.wiring import Core, build_core

BENCH = "media"
CHATS = 10
KINDS = ("text", "voice", "photo", "pdf")
PDF_PAGES = 10
PDF_READS = 30


class _Sink:
    async def progress(self, text: str) -> None:
        return None

    async def answer(self, result: TurnResult) -> None:
        return None


def _incoming(kind: str, chat: int, n: int, files: dict[str, bytes]) -> Incoming:
    offset = {"text": 1000, "voice": 2000, "photo": 3000, "pdf": 4000}[kind]
    cid = ConversationId.telegram(offset + chat)
    if kind == "text":
        return Incoming(cid, f"question {n}: what should I cook tonight?", user_id=offset + chat)
    if kind == "voice":
        upload = Upload("voice", files["voice"], mime="audio/ogg")
    elif kind == "photo":
        upload = Upload("photo", files["photo"], mime="image/jpeg", caption=f"photo {n}: what?")
    else:
        upload = Upload("document", files["pdf"], mime="application/pdf", name=f"report{n}.pdf")
    return Incoming(cid, "", user_id=offset + chat, uploads=(upload,))


def _pdf() -> bytes:
    page = "A paragraph of an ordinary report, about eight hundred characters long. " * 11
    return media_files.pdf_with_text(*(f"Page {n}. {page}" for n in range(PDF_PAGES)))


def _pypdf_text(data: bytes) -> str:
    """A PDF's text as a turn read it before the child process: pypdf in this process."""
    from pypdf import PdfReader

    return "\n\n".join((p.extract_text() or "").strip() for p in PdfReader(io.BytesIO(data)).pages)


async def _pdf_alone(data: bytes, reads: int) -> dict[str, list[float]]:
    """The PDF read alone by a child and by a worker thread, alternately: wall and CPU."""
    pdf = PdfProcesses(processes=1)
    out: dict[str, list[float]] = {"child": [], "thread": [], "child_cpu": [], "thread_cpu": []}
    await pdf.text(data)
    await asyncio.to_thread(_pypdf_text, data)  # warm-up: pypdf imported here too
    for _ in range(reads):
        for how in ("child", "thread"):
            cpu, wall = time.process_time(), time.perf_counter()
            if how == "child":
                await pdf.text(data)
            else:
                await asyncio.to_thread(_pypdf_text, data)
            out[how].append((time.perf_counter() - wall) * 1000)
            out[f"{how}_cpu"].append((time.process_time() - cpu) * 1000)
    await pdf.aclose()
    return out


IMAGE_CASES = (
    ("photo", 1, "photo 1280x960 JPEG"),
    ("photo", 4, "4 photos 1280x960 at once"),
    ("png-25mpx", 4, "4 PNGs 5,000x5,000 at once"),
    ("png-62mpx", 4, "4 PNGs 7,900x7,900 at once"),
)
ROOT = Path(__file__).parents[1]


async def _image_memory() -> list[dict[str, Any]]:
    """Each case of IMAGE_CASES measured by bench/image_rss.py in a process of its own."""
    out = []
    for kind, count, _ in IMAGE_CASES:
        child = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "bench.image_rss", kind, str(count)),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
        )
        stdout, _ = await child.communicate()
        if child.returncode != 0:
            raise RuntimeError(f"bench.image_rss {kind} {count} exited with {child.returncode}")
        out.append(json.loads(stdout))
    return out


async def _batch(core: Core, kind: str, count: int, files: dict[str, bytes]) -> dict[str, Any]:
    latencies: list[float] = []
    cpu_started = time.process_time()
    wall_started = time.perf_counter()
    for n in range(count):
        incoming = _incoming(kind, n % CHATS, n, files)
        started = time.perf_counter()
        await core.service.say(incoming, _Sink())
        latencies.append(time.perf_counter() - started)
    return {
        "messages": count,
        "wall": time.perf_counter() - wall_started,
        "cpu_ms_per_msg": (time.process_time() - cpu_started) * 1000 / count,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p90_ms": percentile(latencies, 90) * 1000,
    }


async def run(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    rounds = 2 if quick else 5
    count = 10 if quick else 40
    voice = media_files.ogg_voice(3.0)
    photo = media_files.jpeg(1280, 960)
    files = {"voice": voice, "photo": photo, "pdf": _pdf()}
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    async with FakeLLM(api_key=API_KEY) as llm:
        llm.models = {MODEL: ["text", "image"]}
        llm.cost_per_transcription = 0.0001
        with tempfile.TemporaryDirectory(prefix="membot-bench-media-") as tmp:
            settings = load_settings(
                _env_file=None,
                telegram=False,
                api=True,
                api_tokens="bench-media-token-0123456789",
                openrouter_api_key=API_KEY,
                openrouter_base_url=llm.base_url,
                openrouter_model=MODEL,
                data_dir=Path(tmp) / "data",
                log_level="WARNING",
            )
            core = build_core(settings)
            await core.start()
            await core.serving()
            try:
                for kind in KINDS:  # warm-up: imports (PyAV, Pillow), first files, clients
                    await _batch(core, kind, 2, files)
                for i in range(rounds):
                    order = KINDS[i % len(KINDS) :] + KINDS[: i % len(KINDS)]
                    for kind in order:
                        runs[kind].append(await _batch(core, kind, count, files))
            finally:
                await core.aclose()

    def med(kind: str, key: str) -> float:
        return statistics.median(float(r[key]) for r in runs[kind])

    def ratios(kind: str, key: str) -> float:
        return statistics.median(
            float(a[key]) / float(b[key]) for a, b in zip(runs[kind], runs["text"], strict=True)
        )

    case = "zero-latency model"
    rows: list[Row] = []
    for kind in KINDS:
        rows.append(row(BENCH, case, f"{kind}: p50", round(med(kind, "p50_ms"), 1), "ms"))
        rows.append(row(BENCH, case, f"{kind}: p90", round(med(kind, "p90_ms"), 1), "ms"))
        cpu = round(med(kind, "cpu_ms_per_msg"), 2)
        rows.append(row(BENCH, case, f"{kind}: CPU per message", cpu, "ms"))
    for kind in ("voice", "photo", "pdf"):
        note = "informational: the transcription's own time is the endpoint's, here zero"
        rows.append(
            row(
                BENCH, case, f"{kind} / text: p50", round(ratios(kind, "p50_ms"), 2), "x", note=note
            )
        )
        rows.append(
            row(BENCH, case, f"{kind} / text: CPU", round(ratios(kind, "cpu_ms_per_msg"), 2), "x")
        )
        added = med(kind, "p50_ms") - med("text", "p50_ms")
        rows.append(row(BENCH, case, f"{kind}: added p50", round(added, 1), "ms"))
    alone = await _pdf_alone(files["pdf"], 10 if quick else PDF_READS)
    case = f"{PDF_PAGES}-page PDF read alone"
    for how in ("child", "thread"):
        p50 = round(statistics.median(alone[how]), 1)
        rows.append(row(BENCH, case, f"{how}: p50", p50, "ms"))
        cpu = round(statistics.median(alone[f"{how}_cpu"]), 1)
        rows.append(row(BENCH, case, f"{how}: CPU of the bot's process", cpu, "ms"))
    ratio = statistics.median(alone["child"]) / statistics.median(alone["thread"])
    rows.append(row(BENCH, case, "child / thread: p50", round(ratio, 2), "x"))
    memory = await _image_memory()
    case = "image decode, a process of its own"
    for (_, _, label), measured in zip(IMAGE_CASES, memory, strict=True):
        refused = [o for o in measured["outcomes"] if "x" not in o]
        note = f"refused: {', '.join(sorted(set(refused)))}" if refused else ""
        peak = measured["peak_mb"]
        target = "<= 600 MB" if label.startswith("4 PNGs") else ""
        rows.append(
            row(BENCH, case, f"{label}: peak RSS added", peak, "MB", target=target, note=note)
        )
        rows.append(row(BENCH, case, f"{label}: RSS kept after", measured["kept_mb"], "MB"))
    extra = {"rounds": rounds, "messages_per_kind": count, "chats_per_kind": CHATS}
    sizes = {f"{kind}_bytes": len(data) for kind, data in files.items()}
    return rows, {**extra, **sizes, "runs": runs, "pdf_alone": alone, "image_memory": memory}
