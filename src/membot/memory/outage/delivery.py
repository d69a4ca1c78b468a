"""The resilient repository's delivery marks (memory/outage/repository.py,
memory/contract/delivery.py).

Reading them needs Redis: while it is down `undelivered` and `delivery_mark` raise
StorageUnavailable, so start-up tries again later instead of taking "none" for an answer.
An answer sent while Redis is down is marked delivered through the spool, after its turn:
the spooled mark means "the conversation's last answer", since the seq the turn was given
then is provisional. A part's progress is not spooled (a crash meanwhile resends the whole).

Redis may come back between a turn's spooled append and its answer's marks (the spool is
written first): the marks then reach Redis, and `Provisional` turns the seq the spool gave
the answer into the one Redis gave it. Taken as it is, a provisional seq names an older
message: the mark would go back to it, and the answers after it, delivered already, would
be sent again with the chat's next turn.

Provisional seqs are the spooled append's caller's alone, for the marks of the answer it
sends at once (the outbox's `deliver`, in the conversation's turn). An answer whose sending
failed is sent again by a resend (the chat's next turn, start-up's sweep), which reads the
mark first and the answers by the seqs Redis gave: reading the mark ends the conversation's
provisional seqs, so the resend's marks are taken as they are. Kept after it, they would
map the resend's seqs as if provisional: its marks would be lost (the answer sent again with
every next message) or name another message (an answer skipped).

A mark made by a spooled turn's seqs, or by a spooled "delivered", marks every older
answer too: it is made only when none of them is still unsent (changes.py `mark_sent`),
else left for the chat's next resend, which sends the older answer and the newer one again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from membot.ids import ConversationId
from membot.memory.contract.delivery import DeliveryMark
from membot.memory.contract.models import Message
from membot.memory.contract.repository import ChatRepository, StorageUnavailable
from membot.memory.outage.changes import Change, mark_sent

_T = TypeVar("_T")


class Provisional:
    """Per conversation, its last turn kept in the spool: the token it was spooled with and,
    once written, the seqs Redis gave its messages (the provisional seq i is the i-th)."""

    def __init__(self) -> None:
        self._turns: dict[ConversationId, tuple[str, list[int] | None]] = {}

    def spooled(self, cid: ConversationId, token: str) -> None:
        self._turns[cid] = (token, None)

    def holds(self, cid: ConversationId) -> bool:
        """Whether `cid`'s marks are still made by the seqs a spooled turn was given."""
        return cid in self._turns

    def settled(self, cid: ConversationId) -> None:
        """A turn of `cid` stored in Redis, or its answer's last mark spooled: seqs are real."""
        self._turns.pop(cid, None)

    def written(self, change: Change, messages: list[Message] | None) -> None:
        """A spooled change written (`messages`: an append's, as stored). One set aside
        leaves its turn without seqs: its answer's marks are not made."""
        turn = self._turns.get(change.cid)
        if change.op == "append" and turn is not None and turn[0] == change.args["token"]:
            self._turns[change.cid] = (turn[0], [m.seq for m in messages or ()])

    def real(self, cid: ConversationId, upto: int, done: bool) -> int | None:
        """The seq Redis gave the message `upto` names; None when it has none (its turn not
        written, or set aside). `done`: the answer's last mark, after which seqs are real."""
        turn = self._turns.get(cid)
        if turn is None:
            return upto
        if done:
            del self._turns[cid]
        seqs = turn[1]
        return seqs[upto - 1] if seqs is not None and 0 < upto <= len(seqs) else None


class _Resilient(Protocol):
    inner: ChatRepository
    provisional: Provisional

    async def _call(self, call: Callable[[], Awaitable[_T]], cid: ConversationId | None) -> _T: ...

    async def _spool(self, change: Change) -> None: ...


class ResilientDeliveries:
    """The delivery methods of the contract, for ResilientRepository."""

    async def undelivered(self: _Resilient, namespace: str) -> list[ConversationId]:
        return await self._call(lambda: self.inner.undelivered(namespace), None)

    async def delivery_mark(self: _Resilient, cid: ConversationId) -> DeliveryMark | None:
        mark = await self._call(lambda: self.inner.delivery_mark(cid), cid)
        # Who reads the mark sends what it names by the seqs Redis gave (the outbox's
        # resend): a spooled turn's provisional seqs are not used from now on.
        self.provisional.settled(cid)
        return mark

    async def mark_delivered(
        self: _Resilient,
        cid: ConversationId,
        upto: int,
        parts: int | None = None,
        sending: bool = False,
    ) -> None:
        async def mark() -> None:
            # After _ready: a spooled turn of `cid` is written by now, its seqs known.
            mapped = self.provisional.holds(cid)
            seq = self.provisional.real(cid, upto, done=parts is None)
            if seq is None:
                return
            if mapped:  # sent while Redis was down: an older answer may be unsent
                await mark_sent(self.inner, cid, seq, parts, sending)
            else:
                await self.inner.mark_delivered(cid, seq, parts, sending)

        try:
            await self._call(mark, cid)
        except StorageUnavailable:
            if parts is None:
                self.provisional.settled(cid)
                await self._spool(Change("delivered", cid))
