"""The journal's file work, in worker threads: append durably, truncate, rewrite, read back."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from membot.durable import append_lines, replace_atomic
from membot.private import private_dir

log = logging.getLogger(__name__)


def append(path: Path, payload: bytes, sync_dir: bool = False) -> int:
    """Append whole lines durably; the journal's size after it. `sync_dir` also makes the
    file's directory entry durable (the journal is truncated, never deleted: once is enough)."""
    return append_lines(path, payload, sync_dir=sync_dir)


def truncate(path: Path) -> None:
    # No sync: after a power cut the old, handled lines may come back, and each is checked
    # against its chat's archive at start-up.
    with contextlib.suppress(FileNotFoundError):
        os.truncate(path, 0)


def rewrite(path: Path, content: bytes) -> int:
    """Replace the journal atomically; its new size. With the directory's fsync: the
    updates still pending must not fall back to an older journal after a power cut."""
    private_dir(path.parent)
    replace_atomic(path, content, sync_dir=True)
    return len(content)


def read(path: Path) -> tuple[list[dict[str, Any]], set[int], int]:
    """The journal's readable updates, the ids marked done, and its size."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [], set(), 0
    records = []
    seen: set[int] = set()
    done: set[int] = set()
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if "done" in record:
                done.update(int(i) for i in record["done"])
            elif int(record["update_id"]) not in seen:  # a batch appended twice after an error
                seen.add(int(record["update_id"]))
                records.append(record)
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("journal: skipping a torn or corrupt line")
    return records, done, len(raw)
