"""One /import in a process of its own (bench/imports.py runs it), for its time and memory:

    python -m bench.import_run DATA_DIR CHAT_ID EXPORT MAX_MB

imports the export into the chat with the importer the bot uses (core/importer.py over the
file backend) and prints one line of JSON: the seconds it took, how far the process's peak
resident memory rose above where it was just before (VmHWM, reset through
/proc/self/clear_refs) and the messages it added. Linux only (/proc)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from membot.core.importer import Importer
from membot.ids import ConversationId
from membot.memory import FileRepository


def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


async def _measure(data_dir: Path, chat: int, export: Path, max_mb: int) -> dict[str, object]:
    repo = FileRepository(data_dir)
    importer = Importer(repo)
    cid = ConversationId.telegram(chat)
    await repo.get_meta(cid)  # the backend's first read done, before the peak is reset
    before = _status_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    started = time.perf_counter()
    report = await importer.run(cid, export, max_mb * 1024 * 1024)
    seconds = time.perf_counter() - started
    peak = _status_mb("VmHWM") - before
    await repo.close()
    return {
        "seconds": round(seconds, 3),
        "peak_mb": round(peak, 1),
        "base_mb": round(before, 1),
        "messages": report.messages,
        "conversations": report.conversations,
        "export_mb": round(export.stat().st_size / 2**20, 1),
    }


def main() -> None:
    data_dir, chat, export, max_mb = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    print(json.dumps(asyncio.run(_measure(Path(data_dir), chat, Path(export), max_mb))))


if __name__ == "__main__":
    main()
