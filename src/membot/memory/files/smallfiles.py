"""The small JSON files of a conversation's directory (facts.json, meta.json): read
defensively, replaced atomically. Blocking: callers run these in worker threads."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from membot.clock import utc_now
from membot.durable import replace_atomic
from membot.memory.contract.models import iso
from membot.memory.files.archive import read_small
from membot.private import private_dir

log = logging.getLogger(__name__)

FACTS = "facts.json"


def write_json(path: Path, data: dict[str, Any], *, sync_dir: bool = True) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    replace_atomic(path, text.encode(), sync_dir=sync_dir)


def read_facts(path: Path, *, keep_unreadable: bool = False) -> list[dict[str, str]]:
    """The kept facts; [] when there are none or the file cannot be read.

    `keep_unreadable` is for writers about to replace the file: an unreadable one is first
    renamed to facts.json.corrupt-<time>, so a new fact never overwrites old ones unseen.
    """
    try:
        data = json.loads(read_small(path))
        return [
            {"text": str(f["text"]), "added_at": str(f.get("added_at", ""))}
            for f in data["facts"]
            if str(f.get("text", "")).strip()
        ]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # Never silently drop what the user asked us to keep: say so loudly, keep the file.
        log.warning("unreadable %s (%s); treating it as empty", path, exc)
        if keep_unreadable:
            aside = path.with_name(f"{path.name}.corrupt-{utc_now():%Y%m%dT%H%M%S%f}")
            os.replace(path, aside)
            log.warning("kept the unreadable facts as %s", aside.name)
        return []


@contextlib.contextmanager
def facts_lock(directory: Path) -> Iterator[None]:
    """The conversation's facts, to one writer at a time across processes: the bot and a
    `membot mcp` beside it both read facts.json, change the list and replace the file (an
    advisory lock on the conversation's directory, held only for that)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def facts_signature(directory: Path) -> tuple[int, int, int] | None:
    """What tells a changed facts.json from the one read before (replaced atomically, so a
    change is a new inode), without reading it; None when there is none."""
    try:
        st = os.stat(directory / FACTS)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def add_fact(directory: Path, fact: str, limit: int) -> bool | None:
    """Keep a fact in facts.json: False when it is there already (in any case), None when
    `limit` facts are kept already."""
    private_dir(directory)
    with facts_lock(directory):
        facts = read_facts(directory / FACTS, keep_unreadable=True)
        if any(f["text"].casefold() == fact.casefold() for f in facts):
            return False
        if len(facts) >= limit:
            return None
        facts.append({"text": fact, "added_at": iso(utc_now())})
        write_json(directory / FACTS, {"facts": facts})
    return True


def remove_facts(directory: Path, texts: list[str]) -> list[str]:
    """Forget these facts (exact texts); the ones that were kept."""
    path = directory / FACTS
    if not directory.is_dir():
        return []
    with facts_lock(directory):
        facts = read_facts(path, keep_unreadable=True)
        keep = [f for f in facts if f["text"] not in texts]
        removed = [f["text"] for f in facts if f["text"] in texts]
        if removed:
            write_json(path, {"facts": keep})
    return removed
