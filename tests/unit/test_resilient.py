"""The resilient repository (memory/resilient.py) and its spool (memory/spool.py), over the
in-memory backend behind a switch that makes every call fail as a dead Redis does, with the
breaker's clock in the test's hands. A real Redis killed and hung: e2e/test_redis_outage.py.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from membot.ids import ConversationId
from membot.memory import ConversationState, MemoryRepository, Message
from membot.memory.base import StorageUnavailable
from membot.memory.models import ChatContext, ChatMeta
from membot.memory.resilient import CircuitBreaker, ResilientRepository
from membot.memory.spool import Change, read_pending

CID = ConversationId.telegram(7)
OTHER = ConversationId.telegram(8)
SESSION = ConversationId.api(uuid.UUID("3f2b8c1e-9a4d-4c6b-8e2f-1a2b3c4d5e6f"))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Switchable:
    """MemoryRepository that fails every call like an unreachable Redis while `down`."""

    def __init__(self) -> None:
        self.store = MemoryRepository()
        self.down = False
        self.calls = 0

    def _gate(self) -> None:
        self.calls += 1
        if self.down:
            raise RedisConnectionError("Connection refused")

    async def tail(self, cid: ConversationId, limit: int) -> list[Message]:
        self._gate()
        return await self.store.tail(cid, limit)

    async def context(self, cid: ConversationId, limit: int) -> ChatContext:
        self._gate()
        return await self.store.context(cid, limit)

    async def append(
        self, cid: ConversationId, messages: Sequence[Message], state: Any = None
    ) -> list[Message]:
        self._gate()
        return await self.store.append(cid, messages, state)

    async def iter_messages(
        self, cid: ConversationId, after_seq: int = 0
    ) -> AsyncGenerator[Message, None]:
        self._gate()
        async for message in self.store.iter_messages(cid, after_seq):
            yield message

    async def get_summary(self, cid: ConversationId) -> str:
        self._gate()
        return await self.store.get_summary(cid)

    async def save_summary(self, cid: ConversationId, *args: Any) -> bool:
        self._gate()
        return await self.store.save_summary(cid, *args)

    async def get_meta(self, cid: ConversationId) -> ChatMeta:
        self._gate()
        return await self.store.get_meta(cid)

    async def set_state(self, cid: ConversationId, state: ConversationState) -> ChatMeta:
        self._gate()
        return await self.store.set_state(cid, state)

    async def get_facts(self, cid: ConversationId) -> list[str]:
        self._gate()
        return await self.store.get_facts(cid)

    async def add_fact(self, cid: ConversationId, fact: str, limit: int) -> bool | None:
        self._gate()
        return await self.store.add_fact(cid, fact, limit)

    async def remove_facts(self, cid: ConversationId, facts: Sequence[str]) -> list[str]:
        self._gate()
        return await self.store.remove_facts(cid, facts)

    async def conversations(self, namespace: str) -> list[ConversationId]:
        self._gate()
        return await self.store.conversations(namespace)

    async def reset(self, cid: ConversationId) -> None:
        self._gate()
        await self.store.reset(cid)

    async def close(self) -> None:
        await self.store.close()


def turn(text: str) -> list[Message]:
    return [Message(role="user", content=text), Message(role="assistant", content=f"re: {text}")]


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def inner() -> Switchable:
    return Switchable()


@pytest.fixture
def spool(tmp_path: Path) -> Path:
    return tmp_path / "redis-spool.jsonl"


@pytest.fixture
def repo(inner: Switchable, spool: Path, clock: Clock) -> ResilientRepository:
    return ResilientRepository(inner, spool, breaker=CircuitBreaker(cooldown=1.0, clock=clock))


def test_the_breaker_opens_once_per_outage_and_is_due_after_its_cooldown(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    breaker = CircuitBreaker(cooldown=1.0, clock=clock)
    assert breaker.closed and not breaker.due()
    with caplog.at_level(logging.INFO):
        assert breaker.open("down") is True
        assert breaker.open("still down") is False
        assert not breaker.closed and not breaker.due()
        clock.now += 1.0
        assert breaker.due()
        breaker.open("the probe failed")
        assert not breaker.due()
        clock.now += 2.5
        breaker.close(written=3)
    assert breaker.closed and breaker.outages == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "Redis is unavailable (down)" in warnings[0].getMessage()
    assert "back after 3.5 s" in caplog.text and "3 spooled change(s)" in caplog.text


async def test_reads_degrade_to_an_unknown_conversation_and_fail_fast(
    repo: ResilientRepository, inner: Switchable
) -> None:
    await repo.append(CID, turn("kept"))
    await repo.add_fact(CID, "likes tea", 10)
    inner.down = True
    ctx = await repo.context(CID, 10)
    assert (ctx.history, ctx.summary, ctx.facts, ctx.meta.messages_total) == ([], "", [], 0)
    assert not repo.available
    calls = inner.calls
    assert await repo.tail(CID, 10) == []
    assert await repo.get_summary(CID) == ""
    assert await repo.get_facts(CID) == []
    assert (await repo.get_meta(CID)).messages_total == 0
    assert await repo.conversations("tg") == []
    assert [m async for m in repo.iter_messages(CID)] == []
    assert await repo.save_summary(CID, "s", 1, 2, "gen") is False
    assert inner.calls == calls  # open: nothing reached the server


async def test_an_api_session_is_unavailable_rather_than_unknown(
    repo: ResilientRepository, inner: Switchable
) -> None:
    inner.down = True
    with pytest.raises(StorageUnavailable):
        await repo.get_meta(SESSION)
    # A new session's first round still runs: its context is empty, its turn spooled.
    assert (await repo.context(SESSION, 10)).history == []
    assert [m.seq for m in await repo.append(SESSION, turn("first"))] == [1, 2]


async def test_writes_are_spooled_and_replayed_in_order_before_newer_ones(
    repo: ResilientRepository, inner: Switchable, spool: Path, clock: Clock
) -> None:
    await repo.append(CID, turn("one"))
    inner.down = True
    consulting = ConversationState(mode="consultation", round=1, max_rounds=3)
    await repo.append(CID, turn("two"), state=consulting)
    await repo.append(OTHER, turn("elsewhere"))
    await repo.add_fact(CID, "likes tea", 10)
    await repo.append(CID, turn("three"))
    assert len(spool.read_text().splitlines()) == 4
    assert texts(await inner.store.tail(CID, 10)) == ["one", "re: one"]

    inner.down = False
    clock.now += 1.0  # due: the next call probes, after the spool is written
    stored = await repo.append(CID, turn("four"))
    assert [m.seq for m in stored] == [7, 8]
    assert texts(await inner.store.tail(CID, 10)) == [
        t for n in ("one", "two", "three", "four") for t in (n, f"re: {n}")
    ]
    assert (await inner.store.get_meta(CID)).state == consulting  # with its turn, in order
    assert await inner.store.get_facts(CID) == ["likes tea"]
    assert texts(await inner.store.tail(OTHER, 10)) == ["elsewhere", "re: elsewhere"]
    assert repo.available and spool.read_text() == ""


async def test_the_spool_survives_a_restart(inner: Switchable, spool: Path, clock: Clock) -> None:
    first = ResilientRepository(inner, spool, breaker=CircuitBreaker(clock=clock))
    inner.down = True
    await first.append(CID, turn("during"))
    await first.reset(OTHER)
    inner.down = False
    second = ResilientRepository(inner, spool, breaker=CircuitBreaker(clock=clock))
    assert await second.check() is True
    assert texts(await inner.store.tail(CID, 10)) == ["during", "re: during"]
    assert spool.read_text() == ""


def test_torn_corrupt_and_done_lines_are_skipped(
    spool: Path, caplog: pytest.LogCaptureFixture
) -> None:
    written = [Change("reset", CID), Change("reset", OTHER), Change("reset", CID)]
    lines = [c.to_line().decode() for c in written]
    done = json.dumps({"done": written[0].id}) + "\n"
    spool.write_text(lines[0] + "not json\n" + lines[1] + done + '{"op": "nope"}\n' + lines[2][:20])
    with caplog.at_level(logging.WARNING):
        pending = read_pending(spool)
    assert [c.id for c in pending] == [written[1].id]
    assert caplog.text.count("skipping unreadable line") == 3


async def test_a_failed_replay_keeps_the_rest_for_later(
    repo: ResilientRepository, inner: Switchable, spool: Path, clock: Clock
) -> None:
    inner.down = True
    await repo.append(CID, turn("a"))
    await repo.append(CID, turn("b"))
    assert await repo.tail(CID, 5) == []
    clock.now += 1.0
    assert await repo.tail(CID, 5) == []  # the probe failed: still open, nothing written
    assert len(read_pending(spool)) == 2
    inner.down = False
    clock.now += 1.0
    assert texts(await repo.tail(CID, 5)) == ["a", "re: a", "b", "re: b"]
