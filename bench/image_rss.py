"""The memory an image decode costs, in a process of its own (bench/media.py runs it):

    python -m bench.image_rss KIND COUNT

builds membot's media part as the wiring does (`build_media`: the ImageDecoder with the
default MEDIA_MAX_PIXELS and MEDIA_IMAGE_DECODES, glibc's large blocks unmapped when freed),
makes the image (KIND: `photo`, a 1280x960 JPEG as Telegram sends; `png-25mpx`, a 5,000 x
5,000 PNG at the pixel bound; `png-62mpx`, a 7,900 x 7,900 PNG of about 200 KB), then has
COUNT of them prepared at once, and prints one line of JSON: how far the process's peak
resident memory rose above where it was just before (VmHWM, reset first through
/proc/self/clear_refs), what it kept afterwards (VmRSS), and each decode's outcome. Linux
only (/proc)."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from tests.fakes import media_files

from bench.core import API_KEY, MODEL
from membot.config import load_settings
from membot.media.errors import MediaError
from membot.wiring import build_media

IMAGES = {
    "photo": lambda: media_files.jpeg(1280, 960),
    "png-25mpx": lambda: media_files.png_uniform(5000),
    "png-62mpx": lambda: media_files.png_uniform(7900),
}


def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


async def _measure(kind: str, count: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="membot-bench-image-") as tmp:
        settings = load_settings(
            _env_file=None,
            telegram=False,
            api=True,
            api_tokens="bench-image-token-0123456789",
            openrouter_api_key=API_KEY,
            openrouter_model=MODEL,
            data_dir=Path(tmp) / "data",
        )
        media = build_media(settings.llm, settings.media, None)
        try:
            data = IMAGES[kind]()
            await media.reader.images.prepare(media_files.jpeg(64, 48))  # Pillow imported
            before = _status_mb("VmRSS")
            Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from here
            outcomes = await asyncio.gather(
                *(media.reader.images.prepare(data) for _ in range(count)),
                return_exceptions=True,
            )
            peak, kept = _status_mb("VmHWM") - before, _status_mb("VmRSS") - before
        finally:
            await media.aclose()
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, MediaError):
            raise outcome
    return {
        "kind": kind,
        "count": count,
        "input_bytes": len(data),
        "peak_mb": round(peak, 1),
        "kept_mb": round(kept, 1),
        "outcomes": [
            type(o).__name__ if isinstance(o, BaseException) else f"{o.width}x{o.height}"
            for o in outcomes
        ],
    }


def main() -> None:
    kind, count = sys.argv[1], int(sys.argv[2])
    print(json.dumps(asyncio.run(_measure(kind, count))))


if __name__ == "__main__":
    main()
