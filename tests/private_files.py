"""File modes on disk: what membot writes under DATA_DIR must be its own user's only."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def usual_umask() -> Iterator[None]:
    """The umask most shells run with (0022, which leaves new files 0644 and directories
    0755 unless a mode is given): membot's modes must not depend on a stricter one."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def open_to_others(root: Path) -> list[str]:
    """Every directory and file at or under `root` that its group or others may use, with
    its mode: what another local user could read or list."""
    found = [root, *sorted(root.rglob("*"))]
    return [f"{p.relative_to(root.parent)} {mode(p):04o}" for p in found if mode(p) & 0o077]
