"""What membot keeps under DATA_DIR (conversations, documents' text, the search index, the
journal, usage) is for its own user only: directories 0700, files 0600.

Each mode is given where the directory or file is created, never through a process-wide
umask: the umask is state of the whole process (the tests', a library caller's) and would
also tighten what is not ours. The umask can only take bits away, so these modes hold
whatever umask the operator runs with. SQLite creates its -wal, -shm and -journal files
with the main file's mode, so an index file created here 0600 keeps them private too.

Files made by an earlier version keep their modes; `chmod 700 DATA_DIR` covers them, and
the start-up check (`exposed`) says so when DATA_DIR is open to others.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> None:
    """`path` as a directory, it and every missing one above it created 0700.

    `Path.mkdir(mode, parents=True)` gives the mode to the last directory only: the ones
    above it get the umask's default (0755), readable by every local user."""
    try:
        path.mkdir(mode=DIR_MODE, exist_ok=True)
    except FileNotFoundError:
        if path.parent == path:
            raise
        private_dir(path.parent)
        path.mkdir(mode=DIR_MODE, exist_ok=True)


def open_private(path: Path, flags: int) -> int:
    """`os.open` with O_CREAT: a new file is created 0600 (an existing one keeps its mode)."""
    return os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)


def create_private(path: Path) -> None:
    """Make sure `path` exists, created 0600 when it did not: for files another library
    creates with its own default mode (SQLite's is 0644)."""
    os.close(open_private(path, os.O_RDONLY))


def exposed(data_dir: Path) -> str | None:
    """A warning when DATA_DIR gives group or others any access; None when it is private
    (or not made yet: it is then created 0700)."""
    try:
        mode = stat.S_IMODE(os.stat(data_dir).st_mode)
    except FileNotFoundError:
        return None
    if not mode & 0o077:
        return None
    where = data_dir.absolute()
    return (
        f"DATA_DIR {where} is open to other users (mode {mode:04o}) and holds every "
        f"conversation in clear text: chmod 700 {where}"
    )
