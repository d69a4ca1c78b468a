"""The resilient repository's `forget` (memory/outage/repository.py; the contract is
memory/contract/repository.py `forget`): never spooled, since a spooled forget would keep the
words in a file until Redis is back; refused with StorageUnavailable while Redis is down, and
made only once every spooled change is written, which empties the spool file."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from membot.ids import ConversationId
from membot.memory.contract.repository import ChatRepository

_T = TypeVar("_T")


class _Resilient(Protocol):
    inner: ChatRepository

    async def _ready(self, cid: ConversationId | None) -> None: ...

    async def _call(self, call: Callable[[], Awaitable[_T]], cid: ConversationId | None) -> _T: ...


class ResilientForget:
    """The contract's `forget`, for ResilientRepository."""

    async def forget(
        self: _Resilient,
        cid: ConversationId,
        seqs: Sequence[int],
        facts: Sequence[str] = (),
        summaries: Callable[[str], bool] | None = None,
    ) -> int:
        await self._ready(None)
        return await self._call(lambda: self.inner.forget(cid, seqs, facts, summaries), cid)
