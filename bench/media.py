"""What a voice message and a photo add to a turn, against a text message (#18).

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
  conversation file (fsync'd) and sent as a data URL; later turns of the chat read it back.

Each kind has chats of its own (every message to the next one, round robin). Rounds
alternate the order of the kinds; per message: the wall time of the turn (median, p90) and
the CPU of the process (bench, core and fakes together, worker threads included) divided by
the messages. Ratios are voice / text and photo / text within the same run.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests import media_files
from tests.fakes import FakeLLM

from bench.core import API_KEY, MODEL, Row, percentile, row
from membot.config import load_settings
from membot.core.media import Upload
from membot.core.turn import Incoming, TurnResult
from membot.ids import ConversationId
from membot.wiring import Core, build_core

BENCH = "media"
CHATS = 10
KINDS = ("text", "voice", "photo")


class _Sink:
    async def progress(self, text: str) -> None:
        return None

    async def answer(self, result: TurnResult) -> None:
        return None


def _incoming(kind: str, chat: int, n: int, voice: bytes, photo: bytes) -> Incoming:
    offset = {"text": 1000, "voice": 2000, "photo": 3000}[kind]
    cid = ConversationId.telegram(offset + chat)
    if kind == "text":
        return Incoming(cid, f"question {n}: what should I cook tonight?", user_id=offset + chat)
    upload = (
        Upload("voice", voice, mime="audio/ogg")
        if kind == "voice"
        else Upload("photo", photo, mime="image/jpeg", caption=f"photo {n}: what is this?")
    )
    return Incoming(cid, "", user_id=offset + chat, uploads=(upload,))


async def _batch(core: Core, kind: str, count: int, voice: bytes, photo: bytes) -> dict[str, Any]:
    latencies: list[float] = []
    cpu_started = time.process_time()
    wall_started = time.perf_counter()
    for n in range(count):
        incoming = _incoming(kind, n % CHATS, n, voice, photo)
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
                    await _batch(core, kind, 2, voice, photo)
                for i in range(rounds):
                    order = KINDS[i % 3 :] + KINDS[: i % 3]
                    for kind in order:
                        runs[kind].append(await _batch(core, kind, count, voice, photo))
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
    for kind in ("voice", "photo"):
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
    extra = {"rounds": rounds, "messages_per_kind": count, "chats_per_kind": CHATS}
    return rows, {**extra, "voice_bytes": len(voice), "photo_bytes": len(photo), "runs": runs}
