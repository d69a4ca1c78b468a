"""The embedded default backend: one directory of plain files per chat.

DATA_DIR/<chat_id>/
    messages.txt    JSON Lines, append-only; the source of truth for the archive
    summary.txt     the current rolling summary (replaced atomically)
    summaries.log   JSON Lines: every summary made, with its time and the seq range it covers
    meta.json       counters, timestamps, settings (replaced atomically)
    facts.json      facts the user asked to keep (replaced atomically)

All blocking file work runs in worker threads, never in the event loop. Appends are one
`write()` of whole lines on an O_APPEND descriptor followed by fdatasync, so a kill -9 can
at worst leave one torn last line, which readers skip and the next append terminates.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from membot.locks import KeyedLocks
from membot.memory.models import (
    ChatContext,
    ChatMeta,
    CorruptRecord,
    Message,
    Summary,
    iso,
    utcnow,
)

log = logging.getLogger(__name__)

MESSAGES = "messages.txt"
SUMMARY = "summary.txt"
SUMMARIES_LOG = "summaries.log"
META = "meta.json"
FACTS = "facts.json"
GRAVE_PREFIX = ".deleted-"  # a reset chat's directory, renamed away before it is deleted

_T = TypeVar("_T")

_BLOCK = 64 * 1024
_FIRST_BLOCK = 4 * 1024


def chat_key(chat_id: int) -> str:
    """The only way a chat id becomes a path component: it must be a real integer."""
    if isinstance(chat_id, bool) or not isinstance(chat_id, int):
        raise TypeError(f"chat_id must be an int, not {type(chat_id).__name__}")
    return str(chat_id)


class FileRepository:
    """ChatRepository over plain files. Single-process: locks are per chat, in this process."""

    def __init__(self, data_dir: Path | str) -> None:
        self.root = Path(data_dir)
        self._lock = KeyedLocks()

    def chat_dir(self, chat_id: int) -> Path:
        return self.root / chat_key(chat_id)

    # -- reading -------------------------------------------------------------------------

    async def tail(self, chat_id: int, limit: int) -> list[Message]:
        if limit <= 0:
            return []
        path = self.chat_dir(chat_id) / MESSAGES
        return await asyncio.to_thread(_read_tail, path, limit)

    async def context(self, chat_id: int, limit: int) -> ChatContext:
        return await asyncio.to_thread(self._context_sync, chat_id, limit)

    async def iter_messages(
        self, chat_id: int, after_seq: int = 0
    ) -> AsyncGenerator[Message, None]:
        path = self.chat_dir(chat_id) / MESSAGES
        reader = _ForwardReader(path, after_seq=after_seq)
        try:
            while batch := await asyncio.to_thread(reader.next_batch):
                for message in batch:
                    yield message
        finally:
            reader.close()

    async def get_summary(self, chat_id: int) -> str:
        path = self.chat_dir(chat_id) / SUMMARY
        return await asyncio.to_thread(_read_text, path)

    async def get_meta(self, chat_id: int) -> ChatMeta:
        return await asyncio.to_thread(self._load_meta, chat_id)

    async def get_facts(self, chat_id: int) -> list[str]:
        path = self.chat_dir(chat_id) / FACTS
        return [f["text"] for f in await asyncio.to_thread(_read_facts, path)]

    # -- writing -------------------------------------------------------------------------

    async def append(self, chat_id: int, messages: Sequence[Message]) -> list[Message]:
        if not messages:
            return []
        return await self._write(chat_id, self._append_sync, chat_id, messages)

    async def save_summary(self, chat_id: int, text: str, covers_from: int, covers_to: int) -> None:
        summary = Summary(text=text, covers_from=covers_from, covers_to=covers_to)
        await self._write(chat_id, self._save_summary_sync, chat_id, summary)

    async def update_settings(self, chat_id: int, **settings: object) -> ChatMeta:
        return await self._write(chat_id, self._update_settings_sync, chat_id, settings)

    async def add_fact(self, chat_id: int, fact: str) -> bool:
        return await self._write(chat_id, self._add_fact_sync, chat_id, fact)

    async def remove_facts(self, chat_id: int, facts: Sequence[str]) -> list[str]:
        return await self._write(chat_id, self._remove_facts_sync, chat_id, list(facts))

    async def reset(self, chat_id: int) -> None:
        await self._write(chat_id, self._reset_sync, chat_id)

    async def _write(self, chat_id: int, fn: Callable[..., _T], *args: Any) -> _T:
        """Run a write in a worker thread under the chat's lock, until the thread is done.

        A cancelled caller (a /reset stopping a summary, a shutdown) cannot stop the thread, so
        the lock is held until the thread finishes: otherwise a reset could run beside a
        summary still being written and find it back on disk afterwards.
        """
        async with self._lock(chat_id):
            work = asyncio.ensure_future(asyncio.to_thread(fn, *args))
            try:
                return await asyncio.shield(work)
            except asyncio.CancelledError:
                while not work.done():
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait({work})
                raise

    async def close(self) -> None:
        return None

    # -- sync internals (worker threads) --------------------------------------------------

    def _context_sync(self, chat_id: int, limit: int) -> ChatContext:
        directory = self.chat_dir(chat_id)
        history = _read_tail(directory / MESSAGES, max(limit, 1))
        total = history[-1].seq if history else 0
        meta = self._load_meta(chat_id, known_total=total)
        return ChatContext(
            history=history[-limit:] if limit > 0 else [],
            summary=_read_text(directory / SUMMARY),
            meta=meta,
            facts=[f["text"] for f in _read_facts(directory / FACTS)],
        )

    def _append_sync(self, chat_id: int, messages: Sequence[Message]) -> list[Message]:
        directory = self.chat_dir(chat_id)
        path = directory / MESSAGES
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            # The chat's first turn. Chats are private: only the bot's user may read them.
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fsync_dir(self.root)
            fd = os.open(path, flags, 0o600)
        try:
            # One descriptor for all of it: the last seq, the torn-line check, the append.
            last, torn, size = _tail_of(fd, 1, path)
            seq = last[0].seq if last else 0
            stored = [replace(m, seq=seq + i) for i, m in enumerate(messages, 1)]
            payload = "".join(m.to_json() + "\n" for m in stored).encode()
            if torn:
                # A crash tore the last line: end it so our first line starts clean.
                log.warning("chat %s: terminating a torn last line in %s", chat_id, MESSAGES)
                payload = b"\n" + payload
            write_all(fd, payload)
            fdatasync(fd)
        finally:
            os.close(fd)
        if size == 0:
            # A new file: its directory entry must be durable too, like its first lines.
            fsync_dir(directory)
        meta = self._load_meta(chat_id, known_total=stored[-1].seq)
        now = utcnow()
        meta.created_at = meta.created_at or now
        meta.updated_at = now
        # Its counters are reconciled with the archive on every read anyway; the fsync is for
        # what the archive cannot rebuild (created_at, the chat's settings) after a power cut.
        _write_json_atomic(directory / META, meta.to_dict())
        return stored

    def _save_summary_sync(self, chat_id: int, summary: Summary) -> None:
        directory = self.chat_dir(chat_id)
        meta = self._load_meta(chat_id)
        if summary.covers_to > meta.messages_total or not directory.is_dir():
            # The chat was reset while the summarizer worked: this summary is of a dead past.
            log.info("chat %s: dropping a summary made before a reset", chat_id)
            return
        _write_text_atomic(directory / SUMMARY, summary.text)
        fd = os.open(directory / SUMMARIES_LOG, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC)
        try:
            entry = (summary.to_json() + "\n").encode()
            if ends_torn(fd):
                entry = b"\n" + entry  # a crash tore the last entry: do not glue onto it
            write_all(fd, entry)
            fdatasync(fd)
        finally:
            os.close(fd)
        meta.summarized_upto = max(meta.summarized_upto, summary.covers_to)
        meta.summaries_made += 1
        meta.last_summary_at = summary.ts
        meta.updated_at = summary.ts
        _write_json_atomic(directory / META, meta.to_dict())

    def _update_settings_sync(self, chat_id: int, settings: dict[str, Any]) -> ChatMeta:
        directory = self.chat_dir(chat_id)
        directory.mkdir(parents=True, exist_ok=True)
        meta = self._load_meta(chat_id)
        for key, value in settings.items():
            if value is None:
                meta.settings.pop(key, None)
            else:
                meta.settings[key] = value
        meta.updated_at = utcnow()
        _write_json_atomic(directory / META, meta.to_dict())
        return meta

    def _add_fact_sync(self, chat_id: int, fact: str) -> bool:
        directory = self.chat_dir(chat_id)
        facts = _read_facts(directory / FACTS, keep_unreadable=True)
        if any(f["text"].casefold() == fact.casefold() for f in facts):
            return False
        facts.append({"text": fact, "added_at": iso(utcnow())})
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_json_atomic(directory / FACTS, {"facts": facts})
        return True

    def _remove_facts_sync(self, chat_id: int, texts: list[str]) -> list[str]:
        path = self.chat_dir(chat_id) / FACTS
        facts = _read_facts(path, keep_unreadable=True)
        keep = [f for f in facts if f["text"] not in texts]
        removed = [f["text"] for f in facts if f["text"] in texts]
        if removed:
            _write_json_atomic(path, {"facts": keep})
        return removed

    def _reset_sync(self, chat_id: int) -> None:
        directory = self.chat_dir(chat_id)
        if not directory.exists():
            return
        # Rename first so that the chat is gone at once, even if the delete is interrupted.
        grave = self.root / f"{GRAVE_PREFIX}{chat_key(chat_id)}-{uuid.uuid4().hex}"
        os.replace(directory, grave)
        fsync_dir(self.root)
        # This chat's, and any an earlier reset left behind when a crash interrupted it:
        # forgotten chats must not linger on disk.
        for leftover in self.root.glob(f"{GRAVE_PREFIX}*"):
            shutil.rmtree(leftover, ignore_errors=True)

    def _load_meta(self, chat_id: int, known_total: int | None = None) -> ChatMeta:
        """meta.json, reconciled with the files: the archive is the source of truth."""
        directory = self.chat_dir(chat_id)
        path = directory / META
        meta: ChatMeta | None = None
        try:
            meta = ChatMeta.from_dict(json.loads(_read_small(path)))
        except FileNotFoundError:
            pass
        except (OSError, ValueError, CorruptRecord) as exc:
            log.warning("chat %s: unreadable %s (%s); rebuilding it", chat_id, META, exc)
            meta = None
        if meta is None:
            meta = ChatMeta(chat_id=chat_id)
            meta.summarized_upto = _last_summary_upto(directory / SUMMARIES_LOG)
        if known_total is None:
            last = _read_tail(directory / MESSAGES, 1)
            known_total = last[0].seq if last else 0
        # A crash between the append and the meta write leaves meta behind; the file wins.
        meta.messages_total = known_total
        meta.chat_id = chat_id
        return meta


# -- file helpers -----------------------------------------------------------------------------


def _read_small(path: Path) -> bytes:
    """A small file's bytes; FileNotFoundError if it is not there. Plain os.open/os.read, as
    the archive's tail reads are: a turn reads four files and needs no buffered file objects.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, _BLOCK):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_text(path: Path) -> str:
    # A damaged byte in summary.txt costs a replacement character, not the turn.
    try:
        return _read_small(path).decode("utf-8", errors="replace").strip()
    except FileNotFoundError:
        return ""


def _read_tail(path: Path, limit: int) -> list[Message]:
    """The last `limit` readable messages, oldest first."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    try:
        return _tail_of(fd, limit, path)[0]
    finally:
        os.close(fd)


def _tail_of(fd: int, limit: int, path: Path) -> tuple[list[Message], bool, int]:
    """The last `limit` readable messages of an open archive, reading backwards from the end;
    also whether its last line is torn (no final newline: a crash mid-write) and its size.

    Blocks start small and grow, so a 20-message window or the last seq costs a few KiB of
    reading and splitting, not a whole block, however long the archive is.
    """
    end = os.fstat(fd).st_size
    pos = end
    step = _FIRST_BLOCK
    carry = b""
    found: list[Message] = []
    unterminated = False
    first = True
    while pos > 0 and len(found) < limit:
        step = min(step, pos)
        pos -= step
        chunk = os.pread(fd, step, pos)
        if pos + step == end:
            unterminated = not chunk.endswith(b"\n")
        lines = (chunk + carry).split(b"\n")
        # The first piece may be the end of a line that starts in an earlier block.
        carry = lines.pop(0) if pos > 0 else b""
        for raw in reversed(lines):
            if len(found) >= limit:
                break
            message = _parse_line(raw, path, torn=first and unterminated)
            first = False
            if message is not None:
                found.append(message)
        step = min(step * 4, _BLOCK)
    if carry and len(found) < limit:
        message = _parse_line(carry, path, torn=first and unterminated)
        if message is not None:
            found.append(message)
    found.reverse()
    return found, unterminated, end


def _read_facts(path: Path, *, keep_unreadable: bool = False) -> list[dict[str, str]]:
    """The kept facts; [] when there are none or the file cannot be read.

    `keep_unreadable` is for writers about to replace the file: an unreadable one is first
    renamed to facts.json.corrupt-<time>, so a new fact never overwrites old ones unseen.
    """
    try:
        data = json.loads(_read_small(path))
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
            aside = path.with_name(f"{path.name}.corrupt-{utcnow():%Y%m%dT%H%M%S%f}")
            os.replace(path, aside)
            log.warning("kept the unreadable facts as %s", aside.name)
        return []


def _seek_after_seq(fh: Any, after_seq: int) -> None:
    """Position `fh` at the first line whose seq is > after_seq, by bisecting byte offsets.

    Sequence numbers grow along the file, so this costs O(log n) reads, not a full scan.
    """
    lo = 0
    hi = fh.seek(0, os.SEEK_END)
    # Invariant: every line starting before `lo` has seq <= after_seq; lines from `hi` on are
    # not yet known. Stop when the window is small and scan forward from `lo`.
    while hi - lo > _BLOCK:
        mid = (lo + hi) // 2
        fh.seek(mid)
        fh.readline()  # skip to the start of the next line
        start = fh.tell()
        seq = None
        while seq is None and fh.tell() < hi:
            raw = fh.readline()
            try:
                seq = Message.from_json(raw).seq
            except CorruptRecord:
                continue
        if seq is None or seq > after_seq:
            hi = mid
        else:
            lo = start
    fh.seek(lo)
    while True:
        pos = fh.tell()
        raw = fh.readline()
        if not raw:
            return
        try:
            if Message.from_json(raw).seq > after_seq:
                fh.seek(pos)
                return
        except CorruptRecord:
            continue


def _parse_line(raw: bytes, path: Path, *, torn: bool) -> Message | None:
    if not raw.strip():
        return None
    try:
        return Message.from_json(raw)
    except CorruptRecord as exc:
        what = "torn last line" if torn else "corrupt line"
        log.warning("skipping a %s in %s (%s)", what, path, exc)
        return None


class _ForwardReader:
    """Reads messages.txt front to back in batches, for archive scans."""

    def __init__(self, path: Path, batch_bytes: int = 1 << 20, after_seq: int = 0) -> None:
        self.path = path
        self.batch_bytes = batch_bytes
        self.after_seq = after_seq
        self._fh: Any = None
        self._carry = b""
        self._done = False

    def next_batch(self) -> list[Message]:
        if self._done:
            return []
        if self._fh is None:
            try:
                self._fh = open(self.path, "rb")  # noqa: SIM115 - closed in close()
            except FileNotFoundError:
                self._done = True
                return []
            if self.after_seq > 0:
                _seek_after_seq(self._fh, self.after_seq)
        out: list[Message] = []
        while not out:
            chunk = self._fh.read(self.batch_bytes)
            if not chunk:
                self._done = True
                if self._carry:
                    message = _parse_line(self._carry, self.path, torn=True)
                    self._carry = b""
                    if message is not None and message.seq > self.after_seq:
                        out.append(message)
                return out
            lines = (self._carry + chunk).split(b"\n")
            self._carry = lines.pop()
            parsed = (_parse_line(r, self.path, torn=False) for r in lines)
            out.extend(m for m in parsed if m and m.seq > self.after_seq)
        return out

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def iter_lines_sync(path: Path, after_seq: int = 0) -> Iterator[Message]:
    """Synchronous archive scan for offline tools (benchmarks, operator commands)."""
    reader = _ForwardReader(path, after_seq=after_seq)
    try:
        while batch := reader.next_batch():
            yield from batch
    finally:
        reader.close()


def _last_summary_upto(path: Path) -> int:
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return 0
    for raw in reversed(lines):
        try:
            return int(json.loads(raw)["covers_to"])
        except (ValueError, KeyError, TypeError):
            log.warning("skipping a corrupt line in %s", path)
    return 0


def ends_torn(fd: int) -> bool:
    """Whether the file ends in an unterminated line (a write cut short by a crash)."""
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _write_text_atomic(path: Path, text: str) -> None:
    """Replace `path` so a reader sees the old or the new text, never a mix or an empty
    file, even after a power cut: temporary file, fsync, rename."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    _write_text_atomic(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


# macOS has no fdatasync; fsync is the same promise there, with the metadata too.
fdatasync = getattr(os, "fdatasync", os.fsync)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
