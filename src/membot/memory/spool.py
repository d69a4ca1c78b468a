"""The outage spool: writes that could not reach Redis, kept in DATA_DIR until it is back.

One JSON object a line, appended and fdatasync'd (memory/durable.py) before the write is
reported done, so a spooled turn survives a kill of the bot. A change is a line
`{"id", "op", "cid", ...}`; once it has been written to Redis a line `{"done": id}` follows,
so a replay cut short by a crash resumes after the last change it finished. When every
change is done the file is emptied. A torn or unreadable line (a crash mid-write, an edit)
is skipped with a warning. `replay` makes a pending change on the repository once it
answers again (memory/resilient.py decides when), `Spool.turns` gives a conversation's
pending turns to read meanwhile.
"""

from __future__ import annotations

import asyncio
import fcntl
import itertools
import json
import logging
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from membot.ids import ConversationId, InvalidConversationId
from membot.memory.base import ChatRepository
from membot.memory.durable import append_lines, open_append, replace_atomic
from membot.memory.models import ConversationState, Message

log = logging.getLogger(__name__)

OPS = frozenset({"append", "set_state", "add_fact", "remove_facts", "reset"})


@dataclass(frozen=True, slots=True)
class Change:
    """One write to replay: `op` names the repository method, `args` its arguments as JSON."""

    op: str
    cid: ConversationId
    args: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def to_line(self) -> bytes:
        record = {"id": self.id, "op": self.op, "cid": str(self.cid), **self.args}
        return (json.dumps(record, ensure_ascii=False) + "\n").encode()

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Change:
        op, cid, change_id = record.pop("op"), record.pop("cid"), record.pop("id")
        if op not in OPS or not isinstance(change_id, str):
            raise ValueError(f"unknown change {op!r}")
        _check_args(op, record)
        return cls(op=op, cid=ConversationId.parse(cid), args=record, id=change_id)

    def messages(self) -> list[Message]:
        """An append's messages (checked when the change was read)."""
        return [Message.from_json(line) for line in self.args["messages"]]

    def state(self) -> ConversationState | None:
        state = self.args.get("state")
        return ConversationState.from_dict(state) if state else None


def _check_args(op: str, args: dict[str, Any]) -> None:
    """Raise ValueError unless `args` are what replaying `op` needs."""
    if op == "append":
        if not isinstance(args["token"], str) or not isinstance(args["messages"], list):
            raise ValueError("bad append")
        for line in args["messages"]:
            if not isinstance(line, str):
                raise ValueError("bad message")
            Message.from_json(line)  # CorruptRecord is a ValueError
        if args.get("state") is not None:
            ConversationState.from_dict(args["state"])
    elif op == "set_state":
        if not isinstance(args["state"], dict):
            raise ValueError("bad state")
        ConversationState.from_dict(args["state"])
    elif op == "add_fact":
        if not isinstance(args["fact"], str) or type(args["limit"]) is not int:
            raise ValueError("bad fact")
    elif op == "remove_facts":
        facts = args["facts"]
        if not isinstance(facts, list) or not all(isinstance(f, str) for f in facts):
            raise ValueError("bad facts")


class Spool:
    """The spool file and the changes in it not yet written (`pending`, oldest first).

    A process owns its spool file for its lifetime: an exclusive `flock` on it, taken at the
    first `load()`. When another live process holds DATA_DIR's `redis-spool.jsonl`, this one
    spools to `redis-spool-<pid>.jsonl` instead, so one's replay never empties the other's
    changes. At the first `load()`, the changes of any other spool file whose lock can be
    taken (its process is gone) are adopted: copied into this one's file, and theirs removed.
    """

    def __init__(self, path: Path) -> None:
        self.base = path
        self.path = path  # the file this process owns, once `load()` has taken it
        self.dead_path = path.with_name(f"{path.stem}.dead{path.suffix}")
        self.pending: list[Change] = []
        self._fd: int | None = None
        self._loaded = False
        self._lock = asyncio.Lock()  # file order is the order changes were spooled

    async def load(self) -> None:
        """Take the spool file and read what a previous run left (once)."""
        if self._loaded:  # every repository call asks: no lock once it is done
            return
        async with self._lock:
            if not self._loaded:
                self.pending = await asyncio.to_thread(self._claim)
                self._loaded = True
                if self.pending:
                    log.info("%d change(s) spooled while Redis was down", len(self.pending))

    def _claim(self) -> list[Change]:
        pid = os.getpid()
        stem, suffix = self.base.stem, self.base.suffix
        names = itertools.chain(
            [self.base.name, f"{stem}-{pid}{suffix}"],
            (f"{stem}-{pid}-{n}{suffix}" for n in itertools.count(2)),
        )
        for name in names:
            path = self.base.with_name(name)
            fd = _try_lock(path)
            if fd is not None:
                self.path, self._fd = path, fd
                break
        if self.path != self.base:
            log.warning(
                "%s is in use by another process: spooling to %s", self.base.name, self.path.name
            )
        pending = read_pending(self.path)
        for other in sorted(self.base.parent.glob(f"{self.base.stem}*{self.base.suffix}")):
            if other == self.path or other == self.dead_path or not _spool_name(self, other):
                continue
            fd = _try_lock(other)
            if fd is None:
                continue  # its process is alive: its changes are its own
            try:
                left = read_pending(other)
                if left:
                    payload = b"".join(c.to_line() for c in left)
                    append_lines(self.path, payload, sync_dir=True)
                    pending.extend(left)
                    log.info("%d change(s) adopted from %s", len(left), other.name)
                if other != self.base:
                    other.unlink(missing_ok=True)
                else:
                    os.ftruncate(fd, 0)
                    os.fsync(fd)
            finally:
                os.close(fd)
        return pending

    async def add(self, change: Change) -> None:
        """Keep a change durably; it is pending once this returns."""
        await self.load()
        async with self._lock:
            await asyncio.to_thread(append_lines, self.path, change.to_line(), sync_dir=True)
            self.pending.append(change)

    async def done(self, change: Change) -> None:
        """Mark the oldest change written; empty the file once nothing is pending."""
        async with self._lock:
            assert self.pending and self.pending[0] is change, "changes are done in order"
            self.pending.pop(0)
            if self.pending:
                line = (json.dumps({"done": change.id}) + "\n").encode()
                await asyncio.to_thread(append_lines, self.path, line)
            else:
                await asyncio.to_thread(self._empty)

    async def dead(self, change: Change) -> None:
        """Set aside the oldest change, which the server refuses: kept in the dead-letter
        file (`redis-spool.dead.jsonl`) for a person to look at, and done here."""
        await asyncio.to_thread(append_lines, self.dead_path, change.to_line(), sync_dir=True)
        await self.done(change)

    def turns(self, cid: ConversationId, limit: int) -> list[Message]:
        """The conversation's turns still pending, oldest first, the last `limit` (what came
        before a pending reset is gone); seqs are provisional. Read-your-writes while the
        server is down: the inbox's "was this answered?" sees them."""
        messages: list[Message] = []
        for change in self.pending:
            if change.cid != cid:
                continue
            if change.op == "reset":
                messages = []
            elif change.op == "append":
                messages.extend(change.messages())
        kept = messages[-limit:] if limit > 0 else []
        return [replace(m, seq=i) for i, m in enumerate(kept, 1)]

    def _empty(self) -> None:
        if self._fd is None:  # not owned (cannot happen after load): replace it whole
            replace_atomic(self.path, b"")
            return
        # In place, not by a rename: the lock is on this file.
        os.ftruncate(self._fd, 0)
        os.fsync(self._fd)

    def close(self) -> None:
        """Give the file up (the process's end); an empty per-process file is removed."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if self.path != self.base and not self.pending and os.fstat(fd).st_size == 0:
                self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)
        self._loaded = False
        self.path = self.base


@runtime_checkable
class _TokenAppend(Protocol):
    async def append_turn(
        self,
        cid: ConversationId,
        messages: Sequence[Message],
        state: ConversationState | None,
        token: str,
    ) -> list[Message]: ...


async def write_turn(
    repo: ChatRepository,
    cid: ConversationId,
    messages: Sequence[Message],
    state: ConversationState | None,
    token: str,
) -> list[Message]:
    """Store a turn under its token where the backend knows tokens (Redis: a turn that did
    reach the server before its reply was lost is not stored twice)."""
    if isinstance(repo, _TokenAppend):
        return await repo.append_turn(cid, messages, state, token)
    return await repo.append(cid, messages, state)


async def replay(repo: ChatRepository, change: Change) -> None:
    """Make a spooled change on the repository it could not reach."""
    cid, args = change.cid, change.args
    state = change.state()
    if change.op == "append":
        await write_turn(repo, cid, change.messages(), state, args["token"])
    elif change.op == "set_state":
        assert state is not None
        await repo.set_state(cid, state)
    elif change.op == "add_fact":
        await repo.add_fact(cid, args["fact"], args["limit"])
    elif change.op == "remove_facts":
        await repo.remove_facts(cid, args["facts"])
    else:
        await repo.reset(cid)


def _spool_name(spool: Spool, path: Path) -> bool:
    """Whether `path` is a spool file of DATA_DIR (the shared one or a process's own)."""
    if path == spool.base:
        return True
    middle = path.name.removeprefix(f"{spool.base.stem}-").removesuffix(spool.base.suffix)
    return middle.replace("-", "").isdigit() and path.name.startswith(f"{spool.base.stem}-")


def _try_lock(path: Path) -> int | None:
    """An exclusive lock on `path` (created when missing), or None when another open file
    holds it (another process, or another Spool of this one)."""
    fd = open_append(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def read_pending(path: Path) -> list[Change]:
    """The changes of a spool file not marked done, in file order."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    changes: dict[str, Change] = {}
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("not an object")
            if "done" in record:
                changes.pop(str(record["done"]), None)
                continue
            change = Change.from_record(record)
        except (ValueError, KeyError, TypeError, InvalidConversationId) as exc:
            log.warning("%s: skipping unreadable line %d (%s)", path.name, number, exc)
            continue
        changes[change.id] = change
    return list(changes.values())
