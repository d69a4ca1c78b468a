"""Answering while Redis is down: a repository in front of another, the breaker and a spool.

`ResilientRepository` holds a ChatRepository (with STORAGE=redis and QUEUE=local, the
Redis one; membot.wiring) and the process's `RedisHealth` (membot/redis/health.py). Every call
goes through the health object: within its budget, and not at all while the breaker is
open. A call that cannot reach Redis raises StorageUnavailable inside, and here it is
answered without Redis:

- reads answer as for an unknown conversation (no summary, no facts; its meta `degraded`,
  so nothing is built on its state), except that `tail` and `context` include the
  conversation's turns still in the spool (read-your-writes: the journal sees them answered);
  except `get_meta` of an API session, which raises StorageUnavailable: a session's next
  round without its session would be a wrong answer; and `context` of a /v1 caller's
  conversation: its whole point is its memory, so it is refused (503) rather than answered
  without it;
- files (`put_file`, `get_file`: images, documents' text) are not spooled: both raise
  StorageUnavailable while Redis is down: their bytes would swell the spool, and a file must
  be reachable by every process that may answer the conversation. So a turn that brings a
  file fails whole (nothing stored; the API answers 503, Telegram says the file cannot be
  kept now) while text turns go on; an unreadable image of the window is its text marker;
- writes (a turn with its state, a state, facts, a reset; not `forget`: memory/outage/forget.py)
  go to the spool
  (memory/outage/spool.py), fdatasync'd, reported done; `save_summary` returns False.

Writing the spool back is one of the health object's recovery steps: once Redis answers,
the spool is written in the order the changes were made (a change the server refuses for
good is set aside in the dead-letter file with an ERROR), and only then is Redis used again.
While Redis is up with changes still pending (a spool left by a previous run, a change
spooled the instant recovery ended), a conversation's calls first wait for them to be
written, so its spooled turns land before its newer ones; other conversations' calls go
ahead while they are written in the background.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from membot.errors import StorageRefused
from membot.ids import API, V1, ConversationId
from membot.memory.contract.models import ChatContext, ChatMeta, Message, new_generation
from membot.memory.contract.repository import ChatRepository, CheckedAtStart, StorageUnavailable
from membot.memory.contract.state import ConversationState
from membot.memory.outage.changes import Change, replay, write_turn
from membot.memory.outage.delivery import Provisional, ResilientDeliveries
from membot.memory.outage.forget import ResilientForget
from membot.memory.outage.spool import Spool
from membot.memory.redis.layout import new_turn_token
from membot.redis.errors import FAILURES, reason
from membot.redis.health import TRANSIENT, RedisHealth

log = logging.getLogger(__name__)
_T = TypeVar("_T")

SPOOL_NAME = "redis-spool.jsonl"


class ResilientRepository(ResilientDeliveries, ResilientForget):
    """A ChatRepository that answers while its server is down (see the module's docstring)."""

    def __init__(self, inner: ChatRepository, health: RedisHealth, spool_path: Path) -> None:
        self.inner = inner
        self.health = health
        self.spool = Spool(spool_path)
        self.provisional = Provisional()  # the spooled turns' seqs, for their answers' marks
        self._writing = asyncio.Lock()
        self._writer: asyncio.Task[None] | None = None  # pending changes, Redis up
        health.on_recovery(self.write_spool)

    # -- Redis, or the spool -----------------------------------------------------------------

    async def _call(self, call: Callable[[], Awaitable[_T]], cid: ConversationId | None) -> _T:
        """The call's result; StorageUnavailable when Redis cannot be used for it now."""
        await self._ready(cid)
        return await self.health.call(call)

    async def _ready(self, cid: ConversationId | None) -> None:
        """Raise StorageUnavailable unless Redis may be used now for `cid`'s call (None: a
        call of no one conversation). With changes pending, `cid`'s wait for them to be
        written (all of them for None); other conversations' calls go ahead."""
        await self.spool.load()
        if not self.health.available:
            raise StorageUnavailable("Redis is unavailable")
        if not self.spool.pending:
            return
        if cid is not None and all(c.cid != cid for c in self.spool.pending):
            if self._writer is None or self._writer.done():
                self._writer = asyncio.create_task(self._write_soon(), name="membot:spool")
            return
        try:
            await self.write_spool()
        except FAILURES as exc:
            self.health.failed(exc)
            raise StorageUnavailable("the spool cannot be written to Redis") from exc

    async def _write_soon(self) -> None:
        try:
            await self.write_spool()
        except FAILURES as exc:
            self.health.failed(exc)  # written on recovery then

    async def write_spool(self) -> int:
        """Write the pending changes to the server, oldest first; how many were written. A
        failure to reach it propagates, and what is not written stays pending."""
        async with self._writing:
            written = 0
            while self.spool.pending:
                change = self.spool.pending[0]
                try:
                    async with asyncio.timeout(self.health.budget):
                        stored = await replay(self.inner, change)
                except Exception as exc:
                    if isinstance(exc, TRANSIENT) and not isinstance(exc, StorageRefused):
                        raise
                    # Refused for good (an error answer, WRONGTYPE say): retrying would stop
                    # the replay, and everything spooled after it, forever.
                    log.error(
                        "%s: a spooled %s was refused by Redis (%s); set aside in %s",
                        change.cid,
                        change.op,
                        reason(exc),
                        self.spool.dead_path.name,
                    )
                    await self.spool.dead(change)
                    continue
                self.provisional.written(change, stored)
                await self.spool.done(change)
                written += 1
            if written and self.health.available:  # else the health's INFO counts them
                log.info("%d spooled change(s) written to Redis", written)
            return written

    async def _spool(self, change: Change) -> None:
        await self.spool.add(change)
        log.debug("%s: %s spooled while Redis is down", change.cid, change.op)

    # -- reading -----------------------------------------------------------------------------

    async def tail(self, cid: ConversationId, limit: int) -> list[Message]:
        try:
            return await self._call(lambda: self.inner.tail(cid, limit), cid)
        except StorageUnavailable:
            return self.spool.turns(cid, limit)

    async def context(self, cid: ConversationId, limit: int) -> ChatContext:
        try:
            return await self._call(lambda: self.inner.context(cid, limit), cid)
        except StorageUnavailable:
            if cid.namespace == V1:
                raise
            return ChatContext(history=self.spool.turns(cid, limit), summary="", meta=_fresh(cid))

    async def get_meta(self, cid: ConversationId) -> ChatMeta:
        try:
            return await self._call(lambda: self.inner.get_meta(cid), cid)
        except StorageUnavailable:
            if cid.namespace == API:
                raise
            return _fresh(cid)

    async def get_summary(self, cid: ConversationId) -> str:
        try:
            return await self._call(lambda: self.inner.get_summary(cid), cid)
        except StorageUnavailable:
            return ""

    async def get_facts(self, cid: ConversationId) -> list[str]:
        try:
            return await self._call(lambda: self.inner.get_facts(cid), cid)
        except StorageUnavailable:
            return []

    async def conversations(self, namespace: str) -> list[ConversationId]:
        try:
            return await self._call(lambda: self.inner.conversations(namespace), None)
        except StorageUnavailable:
            return []

    async def iter_messages(
        self, cid: ConversationId, after_seq: int = 0
    ) -> AsyncGenerator[Message, None]:
        try:
            await self._ready(cid)
        except StorageUnavailable:
            return
        messages = self.inner.iter_messages(cid, after_seq)
        try:
            while True:
                try:
                    message = await self.health.call(lambda: anext(messages))
                except (StopAsyncIteration, StorageUnavailable):
                    return
                yield message
        finally:
            await messages.aclose()

    # -- writing -----------------------------------------------------------------------------

    async def append(
        self,
        cid: ConversationId,
        messages: Sequence[Message],
        state: ConversationState | None = None,
    ) -> list[Message]:
        if not messages:
            return []
        token = new_turn_token()
        write = partial(write_turn, self.inner, cid, messages, state, token)
        try:
            stored = await self._call(write, cid)
            self.provisional.settled(cid)
            return stored
        except StorageUnavailable:
            self.provisional.spooled(cid, token)  # kept in the spool
        args: dict[str, Any] = {"token": token, "messages": [m.to_json() for m in messages]}
        args["state"] = state.to_dict() if state else None
        await self._spool(Change("append", cid, args))
        if state is not None:
            messages = [*messages[:-1], replace(messages[-1], state=state)]
        # Provisional seqs: Redis gives the real ones when the turn is written.
        return [replace(m, seq=i) for i, m in enumerate(messages, 1)]

    async def save_summary(
        self, cid: ConversationId, text: str, covers_from: int, covers_to: int, generation: str
    ) -> bool:
        try:
            return await self._call(
                lambda: self.inner.save_summary(cid, text, covers_from, covers_to, generation), cid
            )
        except StorageUnavailable:
            return False  # not kept while Redis is down: made again at a later turn

    async def set_state(self, cid: ConversationId, state: ConversationState) -> ChatMeta:
        try:
            return await self._call(lambda: self.inner.set_state(cid, state), cid)
        except StorageUnavailable:
            await self._spool(Change("set_state", cid, {"state": state.to_dict()}))
            return replace(_fresh(cid), state=state)

    async def add_fact(self, cid: ConversationId, fact: str, limit: int) -> bool | None:
        try:
            return await self._call(lambda: self.inner.add_fact(cid, fact, limit), cid)
        except StorageUnavailable:
            await self._spool(Change("add_fact", cid, {"fact": fact, "limit": limit}))
            return True  # the cap and the duplicate check apply when it is written

    async def remove_facts(self, cid: ConversationId, facts: Sequence[str]) -> list[str]:
        try:
            return await self._call(lambda: self.inner.remove_facts(cid, facts), cid)
        except StorageUnavailable:
            await self._spool(Change("remove_facts", cid, {"facts": list(facts)}))
            return list(facts)

    async def put_file(self, cid: ConversationId, key: str, data: bytes) -> None:
        await self._call(lambda: self.inner.put_file(cid, key, data), cid)  # not spooled

    async def get_file(self, cid: ConversationId, key: str) -> bytes | None:
        return await self._call(lambda: self.inner.get_file(cid, key), cid)

    async def reset(self, cid: ConversationId) -> None:
        try:
            await self._call(lambda: self.inner.reset(cid), cid)
        except StorageUnavailable:
            await self._spool(Change("reset", cid))

    # -- start and close ---------------------------------------------------------------------

    async def check(self) -> bool:
        """The server's own start-up check; writes a spool left by a previous run."""
        try:
            reachable = not isinstance(self.inner, CheckedAtStart) or await self.inner.check()
        except FAILURES as exc:
            log.warning("Redis is unreachable at start-up: %s", exc)
            reachable = False
        if not reachable:
            self.health.failed(StorageUnavailable("unreachable at start-up"), quiet=True)
            return False
        try:
            await self._ready(None)
        except StorageUnavailable:
            return False
        return True

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
        self.spool.close()
        await self.inner.close()


def _fresh(cid: ConversationId) -> ChatMeta:
    """The stand-in meta of a conversation read while the server is down (`degraded`)."""
    return ChatMeta(conversation=cid, generation=new_generation(), degraded=True)
