"""The file backend's delivery mark (memory/contract/delivery.py): `undelivered.json` in the
conversation's directory, there only while a stored answer may not have been sent.

It is created, synced, before the append of an answer to send (so no crash can leave the
answer without it) and removed once the answer is sent; start-up lists the directories that
have one, one `stat` each, reading no archive. Its later changes (a part sent, an answer
done) are plain renames, not synced: a power cut may cost a second copy of an answer, never
the answer."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from pathlib import Path
from typing import Protocol

from membot.durable import replace_atomic, write_all
from membot.ids import ConversationId
from membot.locks import KeyedLocks
from membot.memory.contract.delivery import DeliveryMark, progress
from membot.memory.files.archive import read_small, read_tail
from membot.memory.files.layout import MESSAGES, listing

log = logging.getLogger(__name__)

UNDELIVERED = "undelivered.json"


def mark_pending(directory: Path, after: int) -> None:
    """Leave the mark "answers after `after` may be unsent" unless there is one (blocking)."""
    path = directory / UNDELIVERED
    if not path.exists():
        replace_atomic(path, DeliveryMark(after).to_json().encode())


def read_mark(directory: Path) -> DeliveryMark | None:
    path = directory / UNDELIVERED
    try:
        return DeliveryMark.from_json(read_small(path))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        # Which answers it meant is lost: sending them all again could repeat a whole chat.
        log.warning("%s: unreadable %s (%s); its answers are not resent", directory, path.name, exc)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return None


def set_mark(directory: Path, upto: int, parts: int | None, sending: bool) -> None:
    mark = read_mark(directory)
    if mark is None:
        return
    # The archive's end matters only to an answer done (is anything stored after it?): a
    # part's progress, recorded before each message is sent, does not read it.
    last = read_tail(directory / MESSAGES, 1) if parts is None else []
    new = progress(mark, upto, parts, sending, last[-1].seq if last else 0)
    path = directory / UNDELIVERED
    if new is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        write_all(fd, new.to_json().encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def marked(root: Path, namespace: str) -> list[ConversationId]:
    return [
        c for c in listing(root, namespace) if (root / c.relative_path() / UNDELIVERED).exists()
    ]


class _Files(Protocol):
    root: Path
    _lock: KeyedLocks

    def conversation_dir(self, cid: ConversationId) -> Path: ...


class FileDeliveries:
    """The delivery methods of the contract, for FileRepository."""

    async def undelivered(self: _Files, namespace: str) -> list[ConversationId]:
        return await asyncio.to_thread(marked, self.root, namespace)

    async def delivery_mark(self: _Files, cid: ConversationId) -> DeliveryMark | None:
        return await asyncio.to_thread(read_mark, self.conversation_dir(cid))

    async def mark_delivered(
        self: _Files,
        cid: ConversationId,
        upto: int,
        parts: int | None = None,
        sending: bool = False,
    ) -> None:
        # Under the conversation's lock: an append between reading the archive's end and
        # removing the mark would be left without one.
        async with self._lock(cid):
            directory = self.conversation_dir(cid)
            await asyncio.to_thread(set_mark, directory, upto, parts, sending)
