"""A ZIP written straight to disk in parts of at most `limit` bytes, each a whole ZIP.

Blocking: called from a worker thread. Nothing is held in memory but the entry being
written: whole entries (`add`) are a file's bytes, streamed entries (`start`, `write`, `end`)
take their text a chunk (a message, a line) at a time. When the next piece would not fit in
the part, the part is closed (its central directory written) and a new one begun; a streamed
entry goes on there under the same name, from the next chunk: a chunk is never cut, so a
part's `messages.jsonl` holds whole lines. An entry or chunk larger than a whole part gets a
part of its own, and that part is larger than `limit`.

How much a part holds so far is the file's position, plus what the deflate stream of the
entry being written may still hold unwritten: zlib keeps at most one block of 16K symbols
(each at most 4 bytes coded, a stored block at most its input) and its lookahead, which
`PENDING` bounds; plus the central directory to come, counted per entry. Files are created
0600 in `directory` and removed by `discard` (or by the caller, once sent).
"""

from __future__ import annotations

import contextlib
import io
import os
import uuid
import zipfile
from pathlib import Path
from typing import IO

from membot.private import open_private, private_dir

PENDING = 128 * 1024
_LOCAL_HEADER = 30 + 20  # the fixed header and a zip64 extra field
_CENTRAL_ENTRY = 46 + 28  # the fixed header and a zip64 extra field
_END = 22 + 56 + 20  # the end records, zip64's included
_TEXT_LEVEL = 6


def deflate_bound(size: int) -> int:
    """The most `size` bytes can take once deflated (zlib's deflateBound, with stored blocks'
    headers): incompressible data grows a little."""
    return size + (size >> 12) + (size >> 14) + (size >> 25) + 13 + 5 * (size // 16_383 + 1)


class PartedZip:
    def __init__(
        self,
        directory: Path,
        limit: int | None,
        *,
        stem: str = "export",
        when: tuple[int, int, int, int, int, int] = (1980, 1, 1, 0, 0, 0),
    ) -> None:
        if limit is not None and limit < 4 * PENDING:
            raise ValueError(f"a part must hold at least {4 * PENDING} bytes")
        self.directory = directory
        self.limit = limit
        self.stem = stem
        self.when = when  # the entries' time (ZIP keeps local time without a zone)
        self.parts: list[Path] = []
        self._file: IO[bytes] | None = None
        self._zip: zipfile.ZipFile | None = None
        self._central = 0  # the central directory's size so far
        self._entries = 0  # entries in the current part
        self._stream: IO[bytes] | None = None
        self._stream_name = ""
        self._streamed = 0  # bytes of the streamed entry written in this part
        private_dir(directory)

    # -- whole entries -----------------------------------------------------------------------

    def add(self, name: str, data: bytes, *, deflate: bool = True) -> None:
        """`data` as the entry `name`: in this part when it fits, else in the next."""
        size = deflate_bound(len(data)) if deflate else len(data)
        self._room_for(name, size)
        method = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
        self._part().writestr(self._info(name, method), data, compresslevel=_TEXT_LEVEL)
        self._count(name)

    # -- streamed entries --------------------------------------------------------------------

    def start(self, name: str) -> None:
        """Begin the streamed entry `name`; its first chunk opens it (an entry with no chunk
        is left out)."""
        if self._stream_name:
            raise RuntimeError("an entry is being written")
        self._stream_name = name

    def write(self, chunk: bytes) -> None:
        """A whole chunk of the streamed entry (never cut between two parts)."""
        if not self._stream_name:
            raise RuntimeError("no entry is being written")
        more = deflate_bound(len(chunk)) + PENDING
        if self._stream is None:
            self._room_for(self._stream_name, more)
            self._open_stream()
        elif self._streamed and self._over(more):
            self._stream.close()
            self._close_part()
            self._open_stream()
        assert self._stream is not None
        self._stream.write(chunk)
        self._streamed += len(chunk)

    def end(self) -> None:
        if self._stream is not None:
            self._stream.close()
        self._stream = None
        self._stream_name = ""

    # -- the parts ---------------------------------------------------------------------------

    def close(self) -> list[Path]:
        """Every part written and closed; their paths, in order (one at least)."""
        self.end()
        self._part()  # an export of nothing is still one (empty) ZIP
        self._close_part()
        return list(self.parts)

    def discard(self) -> None:
        """Close and remove every part (a failed or abandoned export)."""
        with contextlib.suppress(Exception):
            if self._stream is not None:
                self._stream.close()
            self._stream = None
        with contextlib.suppress(Exception):
            self._close_part()
        for path in self.parts:
            path.unlink(missing_ok=True)

    # -- internals ---------------------------------------------------------------------------

    def _part(self) -> zipfile.ZipFile:
        if self._zip is None:
            path = self.directory / f"{self.stem}-{uuid.uuid4().hex}.zip"
            fd = open_private(path, os.O_WRONLY | os.O_EXCL)
            self.parts.append(path)
            self._file = io.FileIO(fd, "wb")
            self._zip = zipfile.ZipFile(self._file, "w", zipfile.ZIP_DEFLATED, allowZip64=True)
            self._central = 0
            self._entries = 0
        return self._zip

    def _close_part(self) -> None:
        zf, file = self._zip, self._file
        self._zip = self._file = None
        if zf is not None:
            zf.close()
        if file is not None:
            file.close()

    def _open_stream(self) -> None:
        info = self._info(self._stream_name, zipfile.ZIP_DEFLATED)
        # Unbounded parts (the API's one ZIP) may pass 4 GiB: zip64 from the start then.
        big = self.limit is None or self.limit >= 1 << 31
        self._stream = self._part().open(info, "w", force_zip64=big)
        self._streamed = 0
        self._count(self._stream_name)

    def _info(self, name: str, method: int) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(name, date_time=self.when)
        info.compress_type = method
        info.external_attr = 0o600 << 16
        return info

    def _count(self, name: str) -> None:
        self._central += _CENTRAL_ENTRY + len(name.encode())
        self._entries += 1

    def _used(self) -> int:
        written = self._file.tell() if self._file is not None else 0
        return written + self._central + _END

    def _over(self, more: int) -> bool:
        """Whether `more` bytes would take the current part past the limit (never an empty
        part: what does not fit in one goes alone)."""
        if self.limit is None or self._zip is None or self._entries == 0:
            return False
        return self._used() + more > self.limit

    def _room_for(self, name: str, size: int) -> None:
        entry = _LOCAL_HEADER + _CENTRAL_ENTRY + 2 * len(name.encode()) + size
        if self._over(entry):
            self._close_part()
