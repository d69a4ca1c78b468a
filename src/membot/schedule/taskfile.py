"""A chat's tasks.json, read and written (blocking: the file backend runs these in worker
threads).

    DATA_DIR/<chat id>/tasks.json   {"version": 1, "tasks": [<Task.to_dict()>, ...]}

beside the chat's memory (memory/files/repository.py), one task a line. Replaced atomically,
0600 in a 0700 directory. A file that does not read is said (a WARNING naming the chat,
never a task's words) and read as no tasks; before anything is written over it, it is moved
aside to tasks.json.corrupt-<UTC time>, so a new task never replaces old ones unseen.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from datetime import datetime
from pathlib import Path

from membot.clock import parse_iso, utc_now
from membot.durable import fsync_dir, replace_atomic
from membot.ids import TELEGRAM, ConversationId, InvalidConversationId
from membot.private import private_dir
from membot.schedule.models import Task

log = logging.getLogger(__name__)

TASKS = "tasks.json"
VERSION = 1


def tasks_path(root: Path, chat: int) -> Path:
    """Where a chat's tasks are kept: its memory's directory (`ConversationId`), never a
    path made from what a user sent."""
    return root / ConversationId.telegram(chat).relative_path() / TASKS


def read_tasks(path: Path, chat: int) -> tuple[list[Task], bool]:
    """The chat's tasks, and False when the file is there and does not read (then no tasks).
    Other failures to read (permissions, the disk) raise."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [], True
    try:
        data = json.loads(raw)
        if data.get("version") != VERSION:
            raise ValueError("an unknown version")
        tasks = [Task.from_dict(record) for record in data["tasks"]]
        if any(task.chat != chat for task in tasks):
            raise ValueError("another chat's task")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        # The reason's type only: a message may quote the file, and the file a task's words.
        log.warning("chat %s: its %s does not read (%s)", chat, TASKS, type(exc).__name__)
        return [], False
    return tasks, True


def write_tasks(path: Path, chat: int, tasks: list[Task], *, readable: bool = True) -> None:
    """Replace the chat's tasks (none: the file goes). An unreadable file is moved aside
    first."""
    if not readable:
        aside = path.with_name(f"{TASKS}.corrupt-{utc_now():%Y%m%dT%H%M%S%fZ}")
        with contextlib.suppress(FileNotFoundError):
            os.replace(path, aside)
            log.warning("chat %s: the %s that did not read is kept as %s", chat, TASKS, aside.name)
    if not tasks:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            fsync_dir(path.parent)
        return
    lines = ",\n".join(json.dumps(task.to_dict(), ensure_ascii=False) for task in tasks)
    data = f'{{"version": {VERSION}, "tasks": [\n{lines}\n]}}\n'.encode()
    directory = path.parent
    for attempt in (1, 2):
        new = not directory.is_dir()
        if new:
            private_dir(directory)
            fsync_dir(directory.parent)  # the chat's directory entry, durable like the file
        try:
            replace_atomic(path, data)
            return
        except FileNotFoundError:
            # The directory went between (a /reset of the chat's memory): make it again.
            if attempt == 2:
                raise


def scan(root: Path) -> dict[int, datetime]:
    """Each chat with tasks under `root`, and its tasks' earliest due time."""
    found: dict[int, datetime] = {}
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return found
    for entry in entries:
        try:
            # Only the directories a chat's id names (not the API's, graves, copies).
            ConversationId(TELEGRAM, entry.name)
        except InvalidConversationId:
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue
        at = earliest(Path(entry.path) / TASKS, int(entry.name))
        if at is not None:
            found[int(entry.name)] = at
    return found


# A time as stored (membot.clock.iso: UTC, milliseconds, "Z"): such times sort as they read.
_STORED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def earliest(path: Path, chat: int) -> datetime | None:
    """The earliest due time of the chat's tasks, None when it has none: for the index, so
    only the due times are read when they are as stored (a third of the time of reading
    every task whole; each is read whole when it is used)."""
    try:
        data = json.loads(path.read_bytes())
        dues = [record["due"] for record in data["tasks"]] if data["version"] == VERSION else []
        if dues and all(isinstance(d, str) and _STORED.fullmatch(d) for d in dues):
            return parse_iso(min(dues))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, AttributeError):
        pass  # read whole below, which says what does not read
    tasks, _ = read_tasks(path, chat)
    return min((task.due for task in tasks), default=None)
