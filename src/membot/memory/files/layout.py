"""The file backend's directories: file names, meta.json (read back reconciled with the
archive), and listing and removing conversations. Blocking: called from worker threads."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from membot.clock import utc_now
from membot.durable import append_lines, fsync_dir, replace_atomic
from membot.ids import NAMESPACES, TELEGRAM, ConversationId, InvalidConversationId
from membot.memory.contract.models import (
    ChatMeta,
    CorruptRecord,
    Message,
    Summary,
    new_generation,
)
from membot.memory.contract.state import ConversationState
from membot.memory.files.archive import last_summary_upto, read_small, read_tail
from membot.memory.files.smallfiles import write_json
from membot.private import private_dir

log = logging.getLogger(__name__)

MESSAGES = "messages.txt"
SUMMARY = "summary.txt"
SUMMARIES_LOG = "summaries.log"
META = "meta.json"
FILES = "files"
GRAVE_PREFIX = ".deleted-"  # a reset conversation's directory, renamed away before deletion


def write_meta(directory: Path, meta: ChatMeta, *, sync_dir: bool = True) -> None:
    write_json(directory / META, meta.to_dict(), sync_dir=sync_dir)


def load_meta(
    directory: Path, cid: ConversationId, *, last: Message | None = None, known: bool = False
) -> ChatMeta:
    """meta.json, reconciled with the archive, its source of truth. `last` is the archive's
    last message when the caller has it (`known`), else it is read here."""
    meta: ChatMeta | None = None
    try:
        meta = ChatMeta.from_dict(json.loads(read_small(directory / META)), cid)
    except FileNotFoundError:
        pass
    except (OSError, ValueError, CorruptRecord) as exc:
        log.warning("%s: unreadable %s (%s); rebuilding it", cid, META, exc)
    if meta is None:
        meta = ChatMeta(conversation=cid, generation=new_generation())
        meta.summarized_upto = last_summary_upto(directory / SUMMARIES_LOG)
    if not known:
        tail = read_tail(directory / MESSAGES, 1)
        last = tail[0] if tail else None
    # A crash between the append and the meta write leaves meta behind; the file wins.
    meta.messages_total = last.seq if last else 0
    meta.adopt_turn_state(last)
    if last is not None and (meta.updated_at is None or last.ts > meta.updated_at):
        meta.updated_at = last.ts  # meta.json is not rewritten by every turn
    return meta


def meta_after_append(
    directory: Path,
    cid: ConversationId,
    last: Message | None,
    stored: Sequence[Message],
    *,
    new_file: bool,
    meta: ChatMeta | None = None,
) -> None:
    """meta.json after an append of `stored` onto an archive whose last message was `last`
    (blocking), when it needs rewriting at all. `meta`: as `load_meta` reads it before the
    append, when the caller keeps it (the backend's context in memory), not read again."""
    # Meta as the archive had it before this turn (a lost meta write of the previous turn
    # is made good from its last line), then this turn's counters and state.
    meta = replace(meta) if meta is not None else load_meta(directory, cid, last=last, known=True)
    if (
        not new_file
        and meta.created_at is not None
        and stored[-1].state is None
        and (last is None or last.state is None)
    ):
        # Nothing that only meta.json holds changed: its counters, its state and its
        # updated_at are read from the archive's last line (see load_meta). Not rewriting
        # it saves an fsync'd file per turn. It is rewritten on a new archive, a meta that
        # had to be rebuilt, a turn that changes the state and the turn after one (in
        # case that turn's meta write failed).
        return
    meta.messages_total = stored[-1].seq
    meta.adopt_turn_state(stored[-1])
    meta.created_at = meta.created_at or utc_now()
    meta.updated_at = stored[-1].ts  # as load_meta reads it from the archive
    # Synced whole, directory included: after the turn that follows a state change, the
    # archive's last line no longer holds that state, and a power cut that lost this
    # rename would bring the old state back. These writes are rare (see above).
    try:
        write_meta(directory, meta)
    except OSError as exc:
        # The turn is durable and meta is rebuilt from the archive on every read: failing
        # now would make the caller think the turn was lost, and send it again.
        log.warning("%s: %s not updated after an append (%s)", cid, META, exc.strerror)


def save_summary(
    directory: Path, cid: ConversationId, summary: Summary, generation: str
) -> ChatMeta | None:
    """A summary saved (blocking); the conversation's meta after it, None when it was not
    saved."""
    meta = load_meta(directory, cid)
    if not directory.is_dir() or meta.generation != generation:
        # The conversation was reset while the summarizer worked: a summary of a dead past.
        log.info("%s: dropping a summary made before a reset", cid)
        return None
    replace_atomic(directory / SUMMARY, summary.text.encode(), sync_dir=False)
    append_lines(directory / SUMMARIES_LOG, (summary.to_json() + "\n").encode())
    meta.summarized_upto = max(meta.summarized_upto, summary.covers_to)
    meta.summaries_made += 1
    meta.last_summary_at = summary.ts  # not updated_at: a summary is not activity
    write_meta(directory, meta)
    return meta


def set_state(directory: Path, cid: ConversationId, state: ConversationState) -> ChatMeta:
    """The conversation's state set (blocking); its meta after it."""
    meta = load_meta(directory, cid)
    meta.state = state
    # Later than every turn's state in the archive: none of those may win over this one.
    meta.state_seq = meta.messages_total
    meta.updated_at = utc_now()
    meta.created_at = meta.created_at or meta.updated_at
    private_dir(directory)
    write_meta(directory, meta)
    return meta


def put_file(root: Path, path: Path, data: bytes) -> None:
    """A conversation file, written atomically and durably (its directories' entries too)."""
    new_dirs = [p for p in (path.parent.parent, path.parent) if not p.is_dir()]
    private_dir(path.parent)
    replace_atomic(path, data)
    for directory in {p.parent for p in new_dirs}:
        fsync_dir(directory)


def read_file(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def remove(root: Path, directory: Path, cid: ConversationId) -> None:
    """A conversation's directory, gone: renamed first so that it is gone at once even if
    the delete is interrupted (graves live in DATA_DIR itself, whatever the namespace)."""
    if not directory.exists():
        return
    grave = root / f"{GRAVE_PREFIX}{cid.namespace}-{cid.key}-{uuid.uuid4().hex}"
    os.replace(directory, grave)
    fsync_dir(directory.parent)
    # This one's, and any an earlier reset left behind when a crash interrupted it:
    # forgotten conversations must not linger on disk.
    for leftover in root.glob(f"{GRAVE_PREFIX}*"):
        shutil.rmtree(leftover, ignore_errors=True)


def listing(root: Path, namespace: str) -> list[ConversationId]:
    """The conversations of a namespace that have a directory."""
    base = root if namespace == TELEGRAM else root / namespace
    found = []
    try:
        entries = list(os.scandir(base))
    except FileNotFoundError:
        return []
    for entry in entries:
        if not entry.is_dir() or entry.name in NAMESPACES:
            continue
        with contextlib.suppress(InvalidConversationId):
            found.append(ConversationId.parse(f"{namespace}:{entry.name}"))
    return sorted(found)
