"""The resilient repository's delivery marks (memory/outage/repository.py,
memory/contract/delivery.py).

Reading them needs Redis: while it is down `undelivered` and `delivery_mark` raise
StorageUnavailable, so start-up tries again later instead of taking "none" for an answer.
An answer sent while Redis is down is marked delivered through the spool, after its turn:
the spooled mark means "the conversation's last answer", since the seq the turn was given
then is provisional. A part's progress is not spooled (a crash meanwhile resends the whole).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from membot.ids import ConversationId
from membot.memory.contract.delivery import DeliveryMark
from membot.memory.contract.repository import ChatRepository, StorageUnavailable
from membot.memory.outage.changes import Change

_T = TypeVar("_T")


class _Resilient(Protocol):
    inner: ChatRepository

    async def _call(self, call: Callable[[], Awaitable[_T]], cid: ConversationId | None) -> _T: ...

    async def _spool(self, change: Change) -> None: ...


class ResilientDeliveries:
    """The delivery methods of the contract, for ResilientRepository."""

    async def undelivered(self: _Resilient, namespace: str) -> list[ConversationId]:
        return await self._call(lambda: self.inner.undelivered(namespace), None)

    async def delivery_mark(self: _Resilient, cid: ConversationId) -> DeliveryMark | None:
        return await self._call(lambda: self.inner.delivery_mark(cid), cid)

    async def mark_delivered(
        self: _Resilient,
        cid: ConversationId,
        upto: int,
        parts: int | None = None,
        sending: bool = False,
    ) -> None:
        try:
            await self._call(lambda: self.inner.mark_delivered(cid, upto, parts, sending), cid)
        except StorageUnavailable:
            if parts is None:
                await self._spool(Change("delivered", cid))
