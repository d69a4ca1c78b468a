"""A write kept for later (memory/outage/spool.py keeps it in a file): what it is, how it is checked
when read back, and how it is made on the repository once the server answers again.

A change is one of the repository's writes (`op` names the method) with its arguments as
JSON. A turn carries the token it was first sent with: replayed, a turn that did reach Redis
before its reply was lost is not stored twice.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from membot.ids import ConversationId
from membot.memory.contract.models import Message
from membot.memory.contract.repository import ChatRepository
from membot.memory.contract.state import ConversationState

OPS = frozenset({"append", "set_state", "add_fact", "remove_facts", "reset", "delivered"})


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


async def replay(repo: ChatRepository, change: Change) -> list[Message] | None:
    """Make a spooled change on the repository it could not reach; an append's messages as
    stored (with their seqs)."""
    cid, args = change.cid, change.args
    state = change.state()
    if change.op == "append":
        return await write_turn(repo, cid, change.messages(), state, args["token"])
    elif change.op == "set_state":
        assert state is not None
        await repo.set_state(cid, state)
    elif change.op == "add_fact":
        await repo.add_fact(cid, args["fact"], args["limit"])
    elif change.op == "remove_facts":
        await repo.remove_facts(cid, args["facts"])
    elif change.op == "delivered":  # the answer sent last, whatever seq Redis gave it
        last = await repo.tail(cid, 1)
        await mark_sent(repo, cid, last[-1].seq if last else 0)
    else:
        await repo.reset(cid)
    return None


async def mark_sent(
    repo: ChatRepository,
    cid: ConversationId,
    seq: int,
    parts: int | None = None,
    sending: bool = False,
) -> bool:
    """`mark_delivered` for an answer sent while Redis was down (its seq given since), unless
    an older answer of the conversation is still unsent: the mark would take it along, and
    it would never be sent. The mark is then left where it is (the older answer is sent
    with the chat's next turn, the newer one again after it); False."""
    mark = await repo.delivery_mark(cid)
    if mark is None:
        return True  # every answer delivered already: nothing to move
    async with contextlib.aclosing(repo.iter_messages(cid, mark.after)) as messages:
        async for message in messages:
            if message.seq >= seq:
                break
            if message.role == "assistant" and message.delivery is not None:
                return False
    await repo.mark_delivered(cid, seq, parts, sending)
    return True
