"""An export file read into conversations: the ZIP ChatGPT or Claude sends (its
`conversations.json`) or that JSON alone. Blocking: run it in a worker thread.

The JSON is parsed as a stream (ijson, one conversation at a time), so a 200 MB export never
stands whole in memory as Python objects, only the text it keeps. What is read is bounded by
`max_bytes` after decompression too (a ZIP's declared size first, then the bytes actually
inflated), so a small ZIP that inflates to gigabytes is refused, not read.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import ijson

from membot.errors import MembotError
from membot.imports.formats import NotAnExport, Thread, thread_of

EXPORT_NAME = "conversations.json"
_ZIP_MAGIC = b"PK\x03\x04"


class BrokenExport(MembotError, ValueError):
    """A ZIP or JSON that cannot be read to its end."""


class ExportTooBig(MembotError, ValueError):
    """More than the import's limit, as sent or once decompressed."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"over {limit} bytes")
        self.limit = limit


class _Bounded:
    """A binary stream that refuses to give more than `limit` bytes."""

    def __init__(self, raw: IO[bytes], limit: int) -> None:
        self.raw = raw
        self.limit = limit
        self.taken = 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size if size >= 0 else self.limit + 1 - self.taken)
        self.taken += len(data)
        if self.taken > self.limit:
            raise ExportTooBig(self.limit)
        return data


def read_export(path: Path, max_bytes: int) -> list[Thread]:
    """The conversations of the export at `path` (each with at least one message).
    NotAnExport, BrokenExport or ExportTooBig when it cannot be imported."""
    if path.stat().st_size > max_bytes:
        raise ExportTooBig(max_bytes)
    with path.open("rb") as file:
        head = file.read(4)
        file.seek(0)
        if head == _ZIP_MAGIC:
            return _from_zip(file, max_bytes)
        return _parse(_Bounded(file, max_bytes))


def _from_zip(file: IO[bytes], max_bytes: int) -> list[Thread]:
    try:
        with zipfile.ZipFile(file) as archive:
            named = [
                info
                for info in archive.infolist()
                if info.filename.rsplit("/", 1)[-1] == EXPORT_NAME and not info.is_dir()
            ]
            if not named:
                raise NotAnExport(f"no {EXPORT_NAME} in the ZIP")
            info = min(named, key=lambda i: i.filename.count("/"))  # the export's own, at its top
            if info.file_size > max_bytes:
                raise ExportTooBig(max_bytes)
            with archive.open(info) as member:
                return _parse(_Bounded(member, max_bytes))
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        NotImplementedError,
        EOFError,
        zlib.error,
    ) as exc:
        raise BrokenExport(f"the ZIP cannot be read: {type(exc).__name__}") from None
    except RuntimeError as exc:  # an encrypted member
        raise BrokenExport(f"the ZIP cannot be read: {exc}") from None


def _parse(stream: _Bounded) -> list[Thread]:
    start = _first_byte(stream)
    if start != b"[":
        raise NotAnExport("not a list of conversations")
    threads: list[Thread] = []
    try:
        for conversation in _items(stream, start):
            thread = thread_of(conversation)
            if thread.messages:
                threads.append(thread)
    except ijson.JSONError as exc:
        raise BrokenExport(f"the JSON cannot be read: {type(exc).__name__}") from None
    if not threads:
        raise NotAnExport("no conversation with a message")
    return threads


def _first_byte(stream: _Bounded) -> bytes:
    """The first byte that is not whitespace or a UTF-8 byte order mark."""
    while True:
        byte = stream.read(1)
        if byte not in (b" ", b"\t", b"\r", b"\n", b"\xef", b"\xbb", b"\xbf"):
            return byte


def _items(stream: _Bounded, start: bytes) -> Iterator[object]:
    """The array's items, the byte already read put back in front."""

    class _Rest:
        first: bytes | None = start

        def read(self, size: int = -1) -> bytes:
            if size == 0:  # ijson's look at what the stream gives
                return b""
            if self.first is not None:
                head, self.first = self.first, None
                return head + stream.read(max(size - 1, 0) if size > 0 else -1)
            return stream.read(size)

    yield from ijson.items(_Rest(), "item", use_float=True)
