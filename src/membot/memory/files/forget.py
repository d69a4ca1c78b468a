"""Forgetting messages in the file backend (/forget; the contract is memory/contract/
repository.py `forget`). Blocking: run in a worker thread under the conversation's lock.

The archive is rewritten whole into a new file beside it, synced and renamed over it: a reader
sees the old archive or the new one, never half, and a crash leaves the old one (the
temporary file is removed at once, or by the next forget). Lines not forgotten are copied as
they are; a line that cannot be read (torn, corrupt) is dropped, since no reader uses it and
it may hold anything. The summaries log is cut before the first forgotten message (or the
first summary saying the words) and rewritten the same way, the summary before that point
made current again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from membot.durable import fsync_dir, replace_atomic, write_all
from membot.ids import ConversationId
from membot.memory.contract.attachment import check_file_key
from membot.memory.contract.forgetting import summary_cut
from membot.memory.contract.models import (
    CorruptRecord,
    Message,
    json_line,
    new_generation,
    parse_iso,
)
from membot.memory.files.delivery import archive_of, follow
from membot.memory.files.layout import (
    FILES,
    MESSAGES,
    SUMMARIES_LOG,
    SUMMARY,
    load_meta,
    write_meta,
)
from membot.memory.files.smallfiles import remove_facts
from membot.private import open_private

log = logging.getLogger(__name__)

_SEQ = re.compile(rb'\{"seq":(\d+),')
_CHUNK = 1 << 20


def forget_sync(
    directory: Path,
    cid: ConversationId,
    seqs: Sequence[int],
    facts: Sequence[str],
    holds: Callable[[str], bool] | None = None,
) -> int:
    """Forget `seqs` and `facts` in a conversation's directory, and the summaries from the
    first that `holds`; how many messages were."""
    wanted = set(seqs)
    if not directory.is_dir():
        return 0
    logged = _logged(directory) if holds is not None else []
    current = _read_text(directory / SUMMARY) if holds is not None else ""
    cut = summary_cut(sorted(wanted), facts, logged, current, holds)
    if not wanted and not facts and cut is None:
        return 0
    files: list[str] = []
    before = archive_of(directory)
    found = _rewrite_archive(directory / MESSAGES, wanted, files) if wanted else 0
    # A new archive: a delivery record that said "nothing pending" says it of this one.
    follow(directory, before, archive_of(directory), 0)
    for key in files:
        with contextlib.suppress(FileNotFoundError, ValueError):
            (directory / FILES / check_file_key(key)).unlink()
    if facts:
        remove_facts(directory, list(facts))
    meta = load_meta(directory, cid)
    if cut is not None:
        kept = _cut_summaries(directory, cut)
        last = kept[-1] if kept else None
        meta.summarized_upto = int(last["covers_to"]) if last else 0
        meta.summaries_made = len(kept)
        meta.last_summary_at = parse_iso(last["ts"]) if last else None
        # A summary being made now read the forgotten messages: the new life drops it, and
        # the search index, built for the old one, is built again.
        meta.generation = new_generation()
    write_meta(directory, meta)
    return found


def _rewrite_archive(path: Path, wanted: set[int], files: list[str]) -> int:
    """Rewrite messages.txt with `wanted` as tombstones; their files' keys go to `files`."""
    tmp = path.with_name(f".{path.name}.forget.tmp")
    found = 0
    try:
        source = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return 0
    try:
        fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            out: list[bytes] = []
            size = 0
            for raw in source:
                line = _kept(raw, wanted, files)
                if line is None:
                    continue
                found += line is not raw
                out.append(line)
                size += len(line)
                if size >= _CHUNK:
                    write_all(fd, b"".join(out))
                    out, size = [], 0
            write_all(fd, b"".join(out))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    finally:
        source.close()
    fsync_dir(path.parent)
    return found


def _kept(raw: bytes, wanted: set[int], files: list[str]) -> bytes | None:
    """The line as the new archive keeps it (the same bytes, a tombstone), or None."""
    head = _SEQ.match(raw)
    if head is None or not raw.endswith(b"\n"):
        return None  # unreadable or torn: no reader uses it
    if int(head.group(1)) not in wanted:
        return raw
    try:
        message = Message.from_json(raw)
    except CorruptRecord:
        return None
    files.extend(a.file for a in message.attachments if a.file)
    return (message.tombstone().to_json() + "\n").encode()


def _logged(directory: Path) -> list[tuple[int, str]]:
    """The summaries log's (covers_to, text), oldest first; unreadable lines skipped."""
    found: list[tuple[int, str]] = []
    try:
        lines = (directory / SUMMARIES_LOG).read_bytes().splitlines()
    except FileNotFoundError:
        return found
    for raw in lines:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            record = json.loads(raw)
            if isinstance(record["text"], str):
                found.append((int(record["covers_to"]), record["text"]))
    return found


def _read_text(path: Path) -> str:
    try:
        return path.read_text("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _cut_summaries(directory: Path, first: int) -> list[dict[str, Any]]:
    """Keep the summaries made before message `first` was covered; the last of them is the
    summary again (none: no summary). Returns the ones kept, oldest first."""
    log_path = directory / SUMMARIES_LOG
    kept: list[dict[str, Any]] = []
    try:
        lines = log_path.read_bytes().splitlines()
    except FileNotFoundError:
        lines = []
    for raw in lines:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            record = json.loads(raw)
            if int(record["covers_to"]) < first and isinstance(record["text"], str):
                kept.append(record)
    if kept:
        payload = "".join(json_line(r) + "\n" for r in kept).encode()
        replace_atomic(log_path, payload, sync_dir=False)
        replace_atomic(directory / SUMMARY, kept[-1]["text"].strip().encode(), sync_dir=False)
    else:
        for name in (SUMMARIES_LOG, SUMMARY):
            with contextlib.suppress(FileNotFoundError):
                (directory / name).unlink()
    return kept


class _Files(Protocol):
    def conversation_dir(self, cid: ConversationId) -> Path: ...

    async def _write(self, cid: ConversationId, fn: Any, *args: Any) -> Any: ...


class FileForget:
    """The contract's `forget`, for FileRepository."""

    async def forget(
        self: _Files,
        cid: ConversationId,
        seqs: Sequence[int],
        facts: Sequence[str] = (),
        summaries: Callable[[str], bool] | None = None,
    ) -> int:
        directory = self.conversation_dir(cid)
        found: int = await self._write(
            cid, forget_sync, directory, cid, list(seqs), list(facts), summaries
        )
        if found:
            log.info("%s: %d message(s) forgotten", cid, found)
        return found
