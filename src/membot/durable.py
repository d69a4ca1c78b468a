"""Durability primitives shared by the file backend and the journal (blocking: worker threads).

append_lines     whole lines onto an O_APPEND file, fdatasync'd; a torn last line (a
                 write cut short by a crash) is terminated first, never glued onto
replace_atomic   temporary file, fsync, rename, and optionally the directory's fsync:
                 a reader sees the old content or the new, never a mix or an empty file
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

from membot.private import open_private, private_dir

# macOS has no fdatasync; fsync is the same promise there, with the metadata too.
fdatasync = getattr(os, "fdatasync", os.fsync)

_APPEND_FLAGS = os.O_RDWR | os.O_APPEND


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(path: Path) -> None:
    """Make the directory's entries (a new file, a rename) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ends_torn(fd: int, size: int | None = None) -> bool:
    """Whether the file ends in an unterminated line (a write cut short by a crash). `size`:
    the file's, when the caller has just read it."""
    size = os.fstat(fd).st_size if size is None else size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def open_append(path: Path) -> int:
    """An O_APPEND descriptor, creating the file (and its directories) private when missing."""
    try:
        return open_private(path, _APPEND_FLAGS)
    except FileNotFoundError:
        private_dir(path.parent)
        return open_private(path, _APPEND_FLAGS)


def append_lines(path: Path, payload: bytes, *, sync_dir: bool = False) -> int:
    """Append whole lines durably; the file's size after it. `sync_dir` also makes the
    file's directory entry durable (needed once, when the file may be new)."""
    fd = open_append(path)
    try:
        if ends_torn(fd):
            payload = b"\n" + payload
        write_all(fd, payload)
        fdatasync(fd)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if sync_dir:
        fsync_dir(path.parent)
    return size


def replace_atomic(path: Path, data: bytes, *, sync_dir: bool = True) -> None:
    """Replace `path` with `data` so that a reader, even after a power cut, sees the old
    content or the new one. `sync_dir=False` skips the directory's fsync where losing the
    rename to a power cut is harmless (the caller can rebuild it from what it did sync)."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    if sync_dir:
        fsync_dir(path.parent)
