"""Answering while Redis is down: a circuit breaker and a local spool around a repository.

`ResilientRepository` wraps a ChatRepository (with STORAGE=redis, the Redis one; wiring.py).
Every call gets CALL_BUDGET; a call that fails or runs out of it opens the breaker, and one
WARNING says the outage began. While it is open nothing waits on the server:

- reads answer as for an unknown conversation (no summary, no facts; its meta `degraded`,
  so nothing is built on its state), except that `tail` and `context` include the
  conversation's turns still in the spool (read-your-writes: the inbox sees them answered);
  except `get_meta` of an API session, which raises
  StorageUnavailable: a session's next round without its session would be a wrong answer;
- writes (a turn with its state, a state, facts, a reset) go to the spool under DATA_DIR
  (memory/spool.py), fdatasync'd, and are reported done; `save_summary` returns False (the
  summary is made again at a later turn).

No call made while the breaker is open probes or waits: every COOLDOWN seconds a background
task PINGs; once the server answers, the spool is written to it in the order the changes
were made (a change the server refuses for good is set aside in the dead-letter file with an
ERROR), then the breaker closes and one INFO says the outage is over. While a closed breaker
still has changes pending, a conversation's calls first wait for them to be written, so its
spooled turns always land before its newer ones. A spool left by a
previous run is written the same way once Redis answers. A spooled turn is replayed with
its own token, so a turn that did reach Redis before its reply was lost is not stored twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from membot.ids import API, ConversationId
from membot.memory.base import ChatRepository, StorageUnavailable
from membot.memory.breaker import CircuitBreaker
from membot.memory.models import ChatContext, ChatMeta, ConversationState, Message, new_generation
from membot.memory.redis import RedisRepository, new_turn_token
from membot.memory.spool import Change, Spool, replay, write_turn

log = logging.getLogger(__name__)
_T = TypeVar("_T")

CALL_BUDGET = 0.5  # seconds one call may take before the server counts as failed
FAILURES: tuple[type[BaseException], ...] = (RedisError, TimeoutError, OSError)
# What a replay retries later: the server did not answer. Anything else refuses the change.
TRANSIENT: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    TimeoutError,
    OSError,
)
SPOOL_NAME = "redis-spool.jsonl"


class ResilientRepository:
    """A ChatRepository that answers while its server is down (see the module's docstring)."""

    def __init__(
        self,
        inner: ChatRepository,
        spool_path: Path,
        *,
        probe: Callable[[], Awaitable[object]] | None = None,
        breaker: CircuitBreaker | None = None,
        budget: float = CALL_BUDGET,
    ) -> None:
        self.inner = inner
        self.spool = Spool(spool_path)
        self.breaker = breaker or CircuitBreaker()
        self.budget = budget
        # A cheap call that tells whether the server is back; None: probed by the next call.
        self._probe = probe
        self._flushing = asyncio.Lock()
        self._reviver: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[bool] | None = None  # a pending spool, breaker closed
        self.written = 0  # spooled changes written since the outage began
        # Observable for tests and logs: PINGs made (by the background reviver only, when
        # there is a probe), those made inline by a caller (never, when there is a probe), and
        # calls that reached the server while the breaker was open (none).
        self.probes = 0
        self.inline_probes = 0
        self.calls_while_open = 0

    # -- the breaker -------------------------------------------------------------------------

    @property
    def available(self) -> bool:
        return self.breaker.closed

    def failed(self, exc: BaseException) -> None:
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        self._opened(self.breaker.open(reason))

    def _opened(self, began: bool) -> None:
        if began:
            self.written = 0
        if self._probe is not None and (self._reviver is None or self._reviver.done()):
            self._reviver = asyncio.create_task(self._revive(), name="membot:redis-reviver")

    async def _revive(self) -> None:
        while not self.breaker.closed:
            await asyncio.sleep(self.breaker.cooldown)  # the probe's period, not synchronisation
            await self._recover(force=True)

    async def _ready(self, cid: ConversationId | None = None) -> bool:
        """Whether the server may be used now for `cid`'s call (None: a call of no one
        conversation). Open: no, at once; only the reviver probes (without a probe function,
        a due call is the probe). Closed with changes spooled: `cid`'s wait for them to be
        written (all of them for None), other conversations' calls go ahead."""
        await self.spool.load()
        if not self.breaker.closed:
            if self._probe is None and self.breaker.due():
                return await self._recover()
            return False
        if not self.spool.pending:
            return True
        if cid is not None and all(c.cid != cid for c in self.spool.pending):
            self._write_soon()  # others' changes: written meanwhile, without this call
            return True
        return await self._recover()

    def _write_soon(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._recover(), name="membot:redis-spool-writer")

    async def _recover(self, *, force: bool = False) -> bool:
        """Probe a server that failed and write the spool to it; whether it is usable."""
        async with self._flushing:
            if self.breaker.closed and not self.spool.pending:
                return True
            if not self.breaker.closed and not (force or self.breaker.due()):
                return False
            try:
                if not self.breaker.closed and self._probe is not None:
                    self.probes += 1
                    if not force:
                        self.inline_probes += 1
                    async with asyncio.timeout(self.budget):
                        await self._probe()
                while self.spool.pending:
                    change = self.spool.pending[0]
                    try:
                        async with asyncio.timeout(self.budget):
                            await replay(self.inner, change)
                    except TRANSIENT:
                        raise
                    except Exception as exc:
                        # Refused for good (a ResponseError, say): retrying would stop the
                        # replay, and everything spooled after it, forever.
                        log.error(
                            "%s: a spooled %s was refused by Redis (%s: %s); set aside in %s",
                            change.cid,
                            change.op,
                            type(exc).__name__,
                            exc,
                            self.spool.dead_path.name,
                        )
                        await self.spool.dead(change)
                        continue
                    await self.spool.done(change)
                    self.written += 1
            except FAILURES as exc:
                self.failed(exc)  # a warning only if this begins an outage
                return False
            if self.breaker.closed:
                log.info("%d spooled change(s) written to Redis", self.written)
            elif self._probe is None and not self.written:
                # Nothing told whether the server is back: the caller's own call is the probe.
                self.breaker.probed_at = self.breaker.clock()
                return True
            self._closed()
            return True

    def _closed(self) -> None:
        self.breaker.close(self.written)
        self.written = 0

    async def _call(
        self, call: Callable[[], Awaitable[_T]], cid: ConversationId | None = None
    ) -> _T | None:
        """The call's result, or None when the server is unavailable (the breaker opens)."""
        if not await self._ready(cid):
            return None
        if not self.breaker.closed:
            self.calls_while_open += 1  # only a due call without a probe function
        try:
            async with asyncio.timeout(self.budget):
                result = await call()
        except FAILURES as exc:
            self.failed(exc)
            return None
        if not self.breaker.closed and self._probe is None:
            self._closed()  # this call was the probe
        return result

    async def _spool(self, change: Change) -> None:
        await self.spool.add(change)
        log.debug("%s: %s spooled while Redis is down", change.cid, change.op)

    # -- reading -----------------------------------------------------------------------------

    async def tail(self, cid: ConversationId, limit: int) -> list[Message]:
        found = await self._call(lambda: self.inner.tail(cid, limit), cid)
        return self.spool.turns(cid, limit) if found is None else found

    async def context(self, cid: ConversationId, limit: int) -> ChatContext:
        found = await self._call(lambda: self.inner.context(cid, limit), cid)
        if found is not None:
            return found
        return ChatContext(history=self.spool.turns(cid, limit), summary="", meta=_fresh(cid))

    async def get_meta(self, cid: ConversationId) -> ChatMeta:
        found = await self._call(lambda: self.inner.get_meta(cid), cid)
        if found is None and cid.namespace == API:
            raise StorageUnavailable(f"{cid}: the storage is unavailable")
        return found or _fresh(cid)

    async def get_summary(self, cid: ConversationId) -> str:
        return await self._call(lambda: self.inner.get_summary(cid), cid) or ""

    async def get_facts(self, cid: ConversationId) -> list[str]:
        return await self._call(lambda: self.inner.get_facts(cid), cid) or []

    async def conversations(self, namespace: str) -> list[ConversationId]:
        return await self._call(lambda: self.inner.conversations(namespace)) or []

    async def iter_messages(
        self, cid: ConversationId, after_seq: int = 0
    ) -> AsyncGenerator[Message, None]:
        if not await self._ready(cid):
            return
        messages = self.inner.iter_messages(cid, after_seq)
        try:
            while True:
                try:
                    async with asyncio.timeout(self.budget):
                        message = await anext(messages)
                except StopAsyncIteration:
                    return
                except FAILURES as exc:
                    self.failed(exc)
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
        stored = await self._call(lambda: write_turn(self.inner, cid, messages, state, token), cid)
        if stored is not None:
            return stored
        args: dict[str, Any] = {
            "token": token,
            "messages": [m.to_json() for m in messages],
            "state": state.to_dict() if state else None,
        }
        await self._spool(Change("append", cid, args))
        if state is not None:
            messages = [*messages[:-1], replace(messages[-1], state=state)]
        # Provisional seqs: Redis gives the real ones when the turn is written.
        return [replace(m, seq=i) for i, m in enumerate(messages, 1)]

    async def save_summary(
        self, cid: ConversationId, text: str, covers_from: int, covers_to: int, generation: str
    ) -> bool:
        saved = await self._call(
            lambda: self.inner.save_summary(cid, text, covers_from, covers_to, generation), cid
        )
        return bool(saved)  # not kept while Redis is down: made again at a later turn

    async def set_state(self, cid: ConversationId, state: ConversationState) -> ChatMeta:
        meta = await self._call(lambda: self.inner.set_state(cid, state), cid)
        if meta is not None:
            return meta
        await self._spool(Change("set_state", cid, {"state": state.to_dict()}))
        return replace(_fresh(cid), state=state)

    async def add_fact(self, cid: ConversationId, fact: str, limit: int) -> bool | None:
        kept = await self._call(lambda: self._kept(self.inner.add_fact(cid, fact, limit)), cid)
        if kept is not None:
            return kept[0]
        await self._spool(Change("add_fact", cid, {"fact": fact, "limit": limit}))
        return True  # the cap and the duplicate check apply when it is written

    async def remove_facts(self, cid: ConversationId, facts: Sequence[str]) -> list[str]:
        removed = await self._call(lambda: self.inner.remove_facts(cid, facts), cid)
        if removed is not None:
            return removed
        await self._spool(Change("remove_facts", cid, {"facts": list(facts)}))
        return list(facts)

    async def reset(self, cid: ConversationId) -> None:
        if await self._call(lambda: self._kept(self.inner.reset(cid)), cid) is None:
            await self._spool(Change("reset", cid))

    @staticmethod
    async def _kept(call: Awaitable[_T]) -> tuple[_T]:
        """A result that may itself be None, boxed so that None still means "unavailable"."""
        return (await call,)

    # -- start and close ---------------------------------------------------------------------

    async def check(self) -> bool:
        """The server's own start-up check; writes a spool left by a previous run."""
        check = getattr(self.inner, "check", None)
        try:
            reachable = bool(await check()) if check is not None else True
        except FAILURES as exc:
            log.warning("Redis is unreachable at start-up: %s", exc)
            reachable = False
        if not reachable:
            self._opened(self.breaker.open("unreachable at start-up", quiet=True))
            return False
        return await self._ready()

    async def close(self) -> None:
        tasks = [t for t in (self._reviver, self._writer) if t is not None]
        self._reviver = self._writer = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.spool.close()
        await self.inner.close()


class ResilientRedisRepository(ResilientRepository, RedisRepository):
    """The Redis backend behind the breaker and the spool: still a RedisRepository (its
    client, prefix and keys, which the turn locks and tools use), every call guarded."""

    def __init__(self, inner: RedisRepository, data_dir: Path, **kw: Any) -> None:
        RedisRepository.__init__(
            self, inner.client, prefix=inner.prefix, max_messages=inner.max_messages, ttl=inner.ttl
        )
        ResilientRepository.__init__(
            self, inner, data_dir / SPOOL_NAME, probe=inner.client.ping, **kw
        )


def _fresh(cid: ConversationId) -> ChatMeta:
    """The stand-in meta of a conversation read while the server is down (`degraded`)."""
    return ChatMeta(conversation=cid, generation=new_generation(), degraded=True)
