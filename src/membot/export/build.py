"""An export built from a cut: the archive read once with `iter_messages`, in batches handed
to a worker thread that writes them into the ZIP (export/parts.py), never the archive or the
ZIP in memory.

One pass over the archive writes `messages.jsonl` straight into the ZIP; beside it the same
thread keeps the transcript's blocks and the kept files' keys in two side files (0600, in
the export's directory), so that conversation.md and files/ follow from them without a
second read of the archive. Order in the ZIP: summary.md, facts.json, tasks.json,
messages.jsonl, conversation.md, files/<key>."""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from membot.export.cut import Cut
from membot.export.parts import PartedZip
from membot.export.transcript import block, facts_json, heading, summary_md, tasks_json
from membot.memory.contract.models import Message
from membot.memory.contract.repository import ChatRepository
from membot.private import open_private

BATCH = 500  # messages handed to the writer thread at once
CHUNK = 64 * 1024  # the transcript goes into the ZIP in chunks of whole messages this large
_LENGTH = struct.Struct("<I")
# Documents' text compresses; images (JPEG, PNG, WebP) are compressed already.
_DEFLATED = frozenset({"txt", "md", "json", "csv"})


@dataclass(frozen=True, slots=True)
class Built:
    parts: list[Path]
    messages: int
    files: int
    missing_files: int  # referred to but gone (the conversation was reset meanwhile)


class _Side:
    """The transcript's blocks (length-prefixed) and the files' keys (a line each)."""

    def __init__(self, directory: Path, label: str) -> None:
        # Named by the conversation, as the parts are: a /forget deletes them (export/watch.py).
        stem = directory / f"{label}-side-{uuid.uuid4().hex}"
        self.paths = (stem.with_suffix(".md"), stem.with_suffix(".keys"))
        self.blocks: IO[bytes] = _private_file(self.paths[0], "w+b")
        self.keys: IO[bytes] = _private_file(self.paths[1], "w+b")

    def add(self, text: str, keys: Sequence[str]) -> None:
        if text:
            data = text.encode()
            self.blocks.write(_LENGTH.pack(len(data)) + data)
        for key in keys:
            self.keys.write(key.encode() + b"\n")

    def chunks(self) -> Iterator[bytes]:
        """The transcript back, in chunks of whole blocks."""
        self.blocks.seek(0)
        pending = bytearray()
        while head := self.blocks.read(_LENGTH.size):
            pending += self.blocks.read(_LENGTH.unpack(head)[0])
            if len(pending) >= CHUNK:
                yield bytes(pending)
                pending.clear()
        if pending:
            yield bytes(pending)

    def rewind(self) -> None:
        self.keys.seek(0)

    def next_keys(self, count: int) -> list[str]:
        found: list[str] = []
        while len(found) < count and (line := self.keys.readline()):
            found.append(line.decode().strip())
        return found

    def close(self) -> None:
        for file, path in zip((self.blocks, self.keys), self.paths, strict=True):
            with contextlib.suppress(OSError):
                file.close()
            path.unlink(missing_ok=True)


def _private_file(path: Path, mode: str) -> IO[bytes]:
    return os.fdopen(open_private(path, os.O_RDWR | os.O_EXCL), mode)


def _write_batch(out: PartedZip, side: _Side, cut: Cut, batch: Sequence[Message]) -> None:
    for message in batch:
        out.write((message.to_json() + "\n").encode())
        keys = [a.file for a in message.attachments if a.file is not None]
        side.add(block(message, cut), keys)


def _write_transcript(out: PartedZip, side: _Side, cut: Cut) -> None:
    out.end()  # messages.jsonl
    out.start("conversation.md")
    out.write(heading(cut).encode())
    for chunk in side.chunks():
        out.write(chunk)
    out.end()
    side.add("", cut.extra_files)
    side.rewind()


async def build(repository: ChatRepository, cut: Cut, out: PartedZip) -> Built:
    """Write the cut's export into `out` and close it; its parts. On any failure (or a
    cancellation) nothing is left: every part and side file is removed."""
    side = await asyncio.to_thread(_Side, out.directory, out.stem)
    try:
        for name, text in (
            ("summary.md", summary_md(cut)),
            ("facts.json", facts_json(cut)),
            ("tasks.json", tasks_json(cut)),
        ):
            await asyncio.to_thread(out.add, name, text.encode())
        out.start("messages.jsonl")
        await asyncio.to_thread(out.write, b"")  # there, empty, in a chat with no message
        count, batch = 0, []
        async with contextlib.aclosing(repository.iter_messages(cut.cid)) as messages:
            async for message in messages:
                if message.seq > cut.upto:
                    break
                if message.forgotten:  # /forget's tombstone: nothing of it leaves
                    continue
                batch.append(message)
                if len(batch) >= BATCH:
                    await asyncio.to_thread(_write_batch, out, side, cut, batch)
                    count, batch = count + len(batch), []
        await asyncio.to_thread(_write_batch, out, side, cut, batch)
        count += len(batch)
        await asyncio.to_thread(_write_transcript, out, side, cut)
        files, missing = await _write_files(repository, cut, out, side)
        parts = await asyncio.to_thread(out.close)
    except BaseException:
        await asyncio.shield(asyncio.to_thread(out.discard))
        raise
    finally:
        await asyncio.shield(asyncio.to_thread(side.close))
    return Built(parts, count, files, missing)


async def _write_files(
    repository: ChatRepository, cut: Cut, out: PartedZip, side: _Side
) -> tuple[int, int]:
    written, missing = 0, 0
    while keys := await asyncio.to_thread(side.next_keys, BATCH):
        for key in keys:
            data = await repository.get_file(cut.cid, key)
            if data is None:
                missing += 1
                continue
            deflate = key.rsplit(".", 1)[-1] in _DEFLATED
            await asyncio.to_thread(out.add, f"files/{key}", data, deflate=deflate)
            written += 1
    return written, missing
