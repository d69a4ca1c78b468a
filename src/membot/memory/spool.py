"""The outage spool: writes that could not reach Redis, kept in DATA_DIR until it is back.

One JSON object a line, appended and fdatasync'd (memory/durable.py) before the write is
reported done, so a spooled turn survives a kill of the bot. A change is a line
`{"id", "op", "cid", ...}`; once it has been written to Redis a line `{"done": id}` follows,
so a replay cut short by a crash resumes after the last change it finished. When every
change is done the file is emptied. A torn or unreadable line (a crash mid-write, an edit)
is skipped with a warning.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membot.ids import ConversationId, InvalidConversationId
from membot.memory.durable import append_lines, replace_atomic

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
        return cls(op=op, cid=ConversationId.parse(cid), args=record, id=change_id)


class Spool:
    """The spool file and the changes in it not yet written (`pending`, oldest first)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pending: list[Change] = []
        self._loaded = False
        self._lock = asyncio.Lock()  # file order is the order changes were spooled

    async def load(self) -> None:
        """Read what a previous run left (once); nothing is created when there is none."""
        async with self._lock:
            if not self._loaded:
                self.pending = await asyncio.to_thread(read_pending, self.path)
                self._loaded = True
                if self.pending:
                    log.info("%d change(s) spooled while Redis was down", len(self.pending))

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
                await asyncio.to_thread(replace_atomic, self.path, b"")


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
