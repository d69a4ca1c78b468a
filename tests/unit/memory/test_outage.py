"""The resilient repository (memory/outage/repository.py), the health object it goes through
(membot/redis/health.py) and its spool (memory/outage/spool.py), over the in-memory backend behind a
switch that makes every call fail as a dead Redis does. The test probes when it wants
(`health.recover()`, what the reviver does every second), with the breaker's clock in its
hands. A real Redis killed and hung: e2e/test_redis_outage.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from collections.abc import AsyncGenerator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiogram import Bot
from aiogram.exceptions import TelegramServerError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from membot.bot.outbox import Outbox
from membot.core.agent import Agent
from membot.core.media import MediaReader, Upload
from membot.core.prompt import PromptBuilder
from membot.core.service import ConversationService
from membot.core.summarizer import Summarizer
from membot.core.turn import Incoming
from membot.ids import ConversationId
from membot.memory import ConversationState, MemoryRepository, Message
from membot.memory.contract.attachment import new_file_key
from membot.memory.contract.delivery import Delivery, DeliveryMark
from membot.memory.contract.models import ChatContext, ChatMeta
from membot.memory.contract.repository import StorageUnavailable
from membot.memory.outage import ResilientRepository
from membot.memory.outage.changes import Change
from membot.memory.outage.spool import read_pending
from membot.redis.health import RedisHealth
from tests.fakes import FakeTelegram
from tests.scripted import RecordingSink, ScriptedModel

CID = ConversationId.telegram(7)
OTHER = ConversationId.telegram(8)
TG_CHAT = 7601
TG = ConversationId.telegram(TG_CHAT)
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
        self.refused: set[str] = set()  # facts the server answers with an error, for good
        self.appends_left: int | None = None  # down again after this many appends

    def _gate(self) -> None:
        self.calls += 1
        if self.down:
            # What RedisRepository raises then (its client's error as the cause).
            raise StorageUnavailable("storage: Redis did not answer") from RedisConnectionError(
                "Connection refused"
            )

    async def ping(self) -> None:
        """The health object's probe."""
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
        if self.appends_left is not None:
            self.down = self.appends_left == 0
            self.appends_left -= 1
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
        if fact in self.refused:
            raise ResponseError("WRONGTYPE Operation against a key holding the wrong kind")
        return await self.store.add_fact(cid, fact, limit)

    async def remove_facts(self, cid: ConversationId, facts: Sequence[str]) -> list[str]:
        self._gate()
        return await self.store.remove_facts(cid, facts)

    async def conversations(self, namespace: str) -> list[ConversationId]:
        self._gate()
        return await self.store.conversations(namespace)

    async def put_file(self, cid: ConversationId, key: str, data: bytes) -> None:
        self._gate()
        await self.store.put_file(cid, key, data)

    async def get_file(self, cid: ConversationId, key: str) -> bytes | None:
        self._gate()
        return await self.store.get_file(cid, key)

    async def reset(self, cid: ConversationId) -> None:
        self._gate()
        await self.store.reset(cid)

    async def undelivered(self, namespace: str) -> list[ConversationId]:
        self._gate()
        return await self.store.undelivered(namespace)

    async def delivery_mark(self, cid: ConversationId) -> DeliveryMark | None:
        self._gate()
        return await self.store.delivery_mark(cid)

    async def mark_delivered(
        self, cid: ConversationId, upto: int, parts: int | None = None, sending: bool = False
    ) -> None:
        self._gate()
        await self.store.mark_delivered(cid, upto, parts, sending)

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


MakeHealth = Callable[[], RedisHealth]


@pytest.fixture
async def make_health(inner: Switchable, clock: Clock) -> AsyncGenerator[MakeHealth, None]:
    """Health objects probing `inner`, closed at the end (their revivers with them). The
    reviver would probe after an hour: here the test probes, with `recover()`."""
    made: list[RedisHealth] = []

    def make() -> RedisHealth:
        made.append(RedisHealth(inner.ping, cooldown=3600.0, clock=clock))
        return made[-1]

    yield make
    for health in made:
        await health.close()


@pytest.fixture
async def repo(
    inner: Switchable, spool: Path, make_health: MakeHealth
) -> AsyncGenerator[ResilientRepository, None]:
    repo = ResilientRepository(inner, make_health(), spool)
    yield repo
    await repo.close()


async def test_the_breaker_opens_once_per_outage_and_closes_once_redis_answers(
    inner: Switchable, clock: Clock, caplog: pytest.LogCaptureFixture, make_health: MakeHealth
) -> None:
    health = make_health()
    written = [3]

    async def recovery_step() -> int:
        return written.pop()

    health.on_recovery(recovery_step)
    assert health.available
    with caplog.at_level(logging.INFO):
        health.failed(RedisConnectionError("down"))
        health.failed(RedisConnectionError("still down"))
        assert not health.available
        inner.down = True
        assert await health.recover() is False  # the probe failed: still open
        assert not health.available and written == [3]
        inner.down = False
        clock.now += 2.5
        assert await health.recover() is True
    assert health.available and health.outages == 1 and health.probes == 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "Redis is unavailable (ConnectionError: down)" in warnings[0].getMessage()
    assert "back after 2.5 s" in caplog.text and "3 spooled change(s)" in caplog.text


async def test_a_call_through_the_health_object_fails_fast_while_it_is_open(
    inner: Switchable, make_health: MakeHealth
) -> None:
    health = make_health()
    calls: list[str] = []

    async def call() -> str:
        calls.append("called")
        raise RedisConnectionError("Connection refused")

    with pytest.raises(StorageUnavailable) as failed:
        await health.call(call)
    assert isinstance(failed.value.__cause__, RedisConnectionError)
    assert not health.available
    with pytest.raises(StorageUnavailable):
        await health.call(call)
    assert calls == ["called"]  # open: the second call never ran


async def test_reads_degrade_to_an_unknown_conversation_and_fail_fast(
    repo: ResilientRepository, inner: Switchable
) -> None:
    await repo.append(CID, turn("kept"))
    await repo.add_fact(CID, "likes tea", 10)
    inner.down = True
    ctx = await repo.context(CID, 10)
    assert (ctx.history, ctx.summary, ctx.facts, ctx.meta.messages_total) == ([], "", [], 0)
    assert not repo.health.available
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
    repo: ResilientRepository, inner: Switchable, spool: Path
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
    assert await repo.health.recover()  # the reviver's probe: the spool is written first
    stored = await repo.append(CID, turn("four"))
    assert [m.seq for m in stored] == [7, 8]
    assert texts(await inner.store.tail(CID, 10)) == [
        t for n in ("one", "two", "three", "four") for t in (n, f"re: {n}")
    ]
    assert (await inner.store.get_meta(CID)).state == consulting  # with its turn, in order
    assert await inner.store.get_facts(CID) == ["likes tea"]
    assert texts(await inner.store.tail(OTHER, 10)) == ["elsewhere", "re: elsewhere"]
    assert repo.health.available and spool.read_text() == ""


async def test_the_spool_survives_a_restart(
    inner: Switchable, spool: Path, make_health: MakeHealth
) -> None:
    first = ResilientRepository(inner, make_health(), spool)
    inner.down = True
    await first.append(CID, turn("during"))
    await first.reset(OTHER)
    first.spool.close()  # the process ends: its spool file is free
    inner.down = False
    second = ResilientRepository(inner, make_health(), spool)
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
    repo: ResilientRepository, inner: Switchable, spool: Path
) -> None:
    inner.down = True
    await repo.append(CID, turn("a"))
    await repo.append(CID, turn("b"))
    spooled = ["a", "re: a", "b", "re: b"]
    assert texts(await repo.tail(CID, 5)) == spooled  # read back from the spool
    assert await repo.health.recover() is False  # the probe failed: still open
    assert texts(await repo.tail(CID, 5)) == spooled
    assert texts(await inner.store.tail(CID, 5)) == []  # nothing written
    assert len(read_pending(spool)) == 2
    inner.down = False
    assert await repo.health.recover() is True
    assert texts(await inner.store.tail(CID, 5)) == ["a", "re: a", "b", "re: b"]
    assert texts(await repo.tail(CID, 5)) == ["a", "re: a", "b", "re: b"]


async def test_a_replay_cut_short_keeps_what_is_left_in_order(
    repo: ResilientRepository, inner: Switchable, spool: Path
) -> None:
    inner.down = True
    for text in ("a", "b", "c"):
        await repo.append(CID, turn(text))
    inner.down = False
    inner.appends_left = 1  # Redis goes down again after the first change is written
    assert await repo.health.recover() is False
    assert texts(await inner.store.tail(CID, 10)) == ["a", "re: a"]
    assert len(read_pending(spool)) == 2  # b and c, for the next recovery
    inner.appends_left, inner.down = None, False
    assert await repo.health.recover() is True
    assert texts(await inner.store.tail(CID, 10)) == [
        t for n in ("a", "b", "c") for t in (n, f"re: {n}")
    ]


async def until(predicate: Callable[[], bool], what: str) -> None:
    """Poll an observable condition (not a sleep standing in for one)."""
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"gave up waiting for {what}")


async def test_a_turn_answered_while_down_leaves_the_real_state_alone(
    repo: ResilientRepository, inner: Switchable
) -> None:
    # A consultation in round 1 of 3, its language set by hand, in the server.
    real = ConversationState(mode="consultation", round=1, max_rounds=3, language="en")
    await inner.store.append(CID, turn("plan a trip"), state=real)
    model = ScriptedModel()
    agent = Agent(
        model=model,
        repository=repo,
        prompts=PromptBuilder("You are the test assistant."),
        summarizer=Summarizer(model, repo, every=1000),
        window_size=20,
        detect=lambda text: "ru",
    )
    service = ConversationService(agent, repo, consult_rounds=3, max_rounds=10)
    inner.down = True
    model.script("ответ")
    result = await agent.respond(
        Incoming(conversation=CID, text="Привет, помоги мне выбрать ноутбук"), RecordingSink()
    )
    assert result.reply == "ответ"

    inner.down = False
    assert await repo.health.recover()  # the spool is written first
    assert (await repo.get_meta(CID)).state == real
    assert texts(await inner.store.tail(CID, 10))[-2:] == [
        "Привет, помоги мне выбрать ноутбук",
        "ответ",
    ]

    inner.down = True
    with pytest.raises(StorageUnavailable):  # /language: the state read is a stand-in
        await service.set_language(CID, "ru")
    assert (await repo.get_meta(CID)).degraded
    inner.down = False
    assert await repo.health.recover()
    assert (await repo.get_meta(CID)).state == real
    assert not (await repo.get_meta(CID)).degraded
    await agent.aclose()


async def test_spooled_turns_are_read_back_while_down_even_after_a_restart(
    inner: Switchable, spool: Path, make_health: MakeHealth
) -> None:
    first = ResilientRepository(inner, make_health(), spool)
    await first.append(CID, turn("kept"))
    inner.down = True
    asked = Message(role="user", content="during", tg_message_id=42)
    await first.append(CID, [asked, Message(role="assistant", content="re: during")])
    await first.append(OTHER, turn("elsewhere"))
    first.spool.close()  # a restart, Redis still down
    second = ResilientRepository(inner, make_health(), spool)
    assert await second.check() is False  # the spool cannot be written: still down
    stored = await second.tail(CID, 10)
    assert texts(stored) == ["during", "re: during"]
    assert [m.tg_message_id for m in stored if m.role == "user"] == [42]  # the journal: answered
    assert texts(await second.tail(CID, 1)) == ["re: during"]  # the last `limit`
    assert texts((await second.context(CID, 10)).history) == ["during", "re: during"]


async def test_while_open_only_the_reviver_probes_and_no_call_reaches_the_server(
    inner: Switchable, spool: Path
) -> None:
    probes: list[str] = []
    release = asyncio.Event()

    async def hung_ping() -> None:
        """A hung server: the probe answers only when the test lets it (then fails)."""
        task = asyncio.current_task()
        probes.append(task.get_name() if task else "")
        await release.wait()
        raise RedisConnectionError("still hung")

    health = RedisHealth(hung_ping, cooldown=0.01, budget=30.0)
    repo = ResilientRepository(inner, health, spool)
    inner.down = True
    assert await repo.tail(CID, 10) == []  # the call that finds it down
    calls = inner.calls
    for n in range(1, 4):
        await until(lambda n=n: len(probes) >= n, "the reviver's probe")
        # The breaker is due and the reviver's probe hangs: answers neither probe nor wait
        # for it (the bound only turns a wait into a failure instead of a hang).
        async with asyncio.timeout(5.0):
            assert await repo.tail(OTHER, 10) == []
            await repo.append(CID, turn(f"t{n}"))
            assert (await repo.context(CID, 10)).meta.degraded
        release.set()  # this probe fails; the next one hangs again
        release.clear()
    assert inner.calls == calls  # nothing reached the server while it was open
    assert set(probes) == {"membot:redis-reviver"}  # no answer probed inline
    assert health.probes >= 3
    await repo.close()


def test_a_spooled_change_without_its_arguments_is_skipped(
    spool: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = Change("add_fact", CID, {"fact": "likes tea", "limit": 10})
    bad = [
        Change("add_fact", CID, {}),
        Change("append", CID, {"token": "t"}),
        Change("append", CID, {"token": "t", "messages": ["not a message"]}),
        Change("set_state", CID, {"state": "chat"}),
        Change("remove_facts", CID, {"facts": [1]}),
    ]
    spool.write_bytes(b"".join(c.to_line() for c in [*bad, good]))
    with caplog.at_level(logging.WARNING):
        assert [c.id for c in read_pending(spool)] == [good.id]
    assert caplog.text.count("skipping unreadable line") == len(bad)


async def test_a_change_redis_refuses_is_set_aside_and_the_replay_goes_on(
    repo: ResilientRepository,
    inner: Switchable,
    spool: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    inner.down = True
    await repo.add_fact(CID, "refused", 10)
    await repo.append(CID, turn("after"))
    inner.down = False
    inner.refused = {"refused"}
    with caplog.at_level(logging.ERROR):
        assert await repo.health.recover()
        assert texts(await repo.tail(CID, 10)) == ["after", "re: after"]
    assert repo.health.available and spool.read_text() == ""
    [dead] = read_pending(spool.with_name("redis-spool.dead.jsonl"))
    assert (dead.op, dead.args["fact"]) == ("add_fact", "refused")
    [error] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "refused by Redis (ResponseError" in error.getMessage()


async def test_two_processes_on_one_data_dir_keep_their_own_spools(
    inner: Switchable, spool: Path, make_health: MakeHealth
) -> None:
    # flock is per open file: two repositories of one process conflict like two processes.
    one = ResilientRepository(inner, make_health(), spool)
    two = ResilientRepository(inner, make_health(), spool)
    inner.down = True
    await one.append(CID, turn("one"))
    await two.append(OTHER, turn("two"))
    assert one.spool.path == spool and two.spool.path == spool.with_name(
        f"redis-spool-{os.getpid()}.jsonl"
    )
    inner.down = False
    assert await one.health.recover()
    assert texts(await one.tail(CID, 10)) == ["one", "re: one"]  # one's replay...
    assert len(read_pending(two.spool.path)) == 1  # ...leaves two's change alone
    assert await two.health.recover()
    assert texts(await two.tail(OTHER, 10)) == ["two", "re: two"]
    assert read_pending(two.spool.path) == []
    two.spool.close()
    assert not two.spool.path.with_name(f"redis-spool-{os.getpid()}.jsonl").exists()

    # A spool whose process is gone (its lock is free) is adopted at start.
    orphan = spool.with_name("redis-spool-999999.jsonl")
    orphan.write_bytes(
        Change(
            "append", CID, {"token": "o", "messages": [m.to_json() for m in turn("orphan")]}
        ).to_line()
    )
    one.spool.close()
    three = ResilientRepository(inner, make_health(), spool)
    assert await three.check() is True
    assert texts(await inner.store.tail(CID, 2)) == ["orphan", "re: orphan"]
    assert not orphan.exists()
    three.spool.close()


async def test_a_left_spool_holds_up_only_its_own_conversations(
    inner: Switchable, spool: Path, make_health: MakeHealth
) -> None:
    first = ResilientRepository(inner, make_health(), spool)
    inner.down = True
    await first.append(CID, turn("left"))
    first.spool.close()  # the process ends; Redis comes back before the next one starts
    inner.down = False
    await inner.store.append(OTHER, turn("other"))
    second = ResilientRepository(inner, make_health(), spool)
    # Another conversation's call does not wait for the spool; it is written meanwhile.
    assert texts(await second.tail(OTHER, 10)) == ["other", "re: other"]
    await until(lambda: not second.spool.pending, "the spool written in the background")
    assert texts(await inner.store.tail(CID, 10)) == ["left", "re: left"]
    await second.close()


async def test_files_are_not_spooled_a_turn_bringing_one_fails_whole_and_text_goes_on(
    repo: ResilientRepository, inner: Switchable
) -> None:
    """While Redis is down a conversation file can be neither kept nor read (a local spool
    is not reachable by the other processes): the turn that brings one fails with
    StorageUnavailable and stores nothing; a text message is still answered."""
    model = ScriptedModel()
    agent = Agent(
        model=model,
        repository=repo,
        prompts=PromptBuilder("You are the test assistant."),
        summarizer=Summarizer(model, repo, every=1000),
        window_size=20,
        detect=lambda text: "en",
        media=MediaReader(transcriber=None, catalog=None, ledger=None, default_model="m"),
    )
    key = new_file_key("txt")
    inner.down = True
    with pytest.raises(StorageUnavailable):
        await repo.put_file(CID, key, b"notes")
    with pytest.raises(StorageUnavailable):
        await repo.get_file(CID, key)
    model.script("read it", "hello")
    note = Upload("document", b"buy milk", mime="text/plain", name="notes.txt")
    with pytest.raises(StorageUnavailable):
        await agent.respond(Incoming(CID, "my notes", uploads=(note,)), RecordingSink())
    assert repo.spool.pending == []
    answered = await agent.respond(Incoming(CID, "hi there"), RecordingSink())
    assert answered.reply == "hello"
    assert [c.op for c in repo.spool.pending] == ["append"]


async def test_an_answer_sent_while_redis_is_down_is_marked_delivered_once_it_is_back(
    repo: ResilientRepository, inner: Switchable
) -> None:
    """The turn and its delivery go through the spool, in that order: once written, the
    answer is not left marked to be sent again (its seq was provisional: the spooled mark
    names the conversation's last answer)."""
    await repo.append(CID, turn("before"))
    inner.down = True
    answer = Message(role="assistant", content="re: now", delivery=Delivery())
    stored = await repo.append(CID, [Message(role="user", content="now"), answer])
    await repo.mark_delivered(CID, stored[-1].seq)
    with pytest.raises(StorageUnavailable):  # start-up would try again, not take "none"
        await repo.undelivered("tg")
    inner.down = False
    assert await repo.health.recover()
    assert texts(await inner.store.tail(CID, 4)) == ["before", "re: before", "now", "re: now"]
    assert await inner.store.delivery_mark(CID) is None
    assert await repo.undelivered("tg") == []


async def test_an_answer_stored_while_down_and_sent_once_redis_is_back_is_marked_delivered(
    repo: ResilientRepository, inner: Switchable
) -> None:
    """Redis comes back between the turn's spooled append and its sending (the outbox's
    marks then reach Redis, under the seq the spool gave the answer): the mark names the
    answer Redis stored, so neither it nor an older one delivered already is sent again."""
    done = Message(role="assistant", content="re: before", delivery=Delivery())
    before = await repo.append(CID, [Message(role="user", content="before"), done])
    await repo.mark_delivered(CID, before[-1].seq)
    inner.down = True
    answer = Message(role="assistant", content="re: now", delivery=Delivery())
    stored = await repo.append(CID, [Message(role="user", content="now"), answer])
    inner.down = False
    assert await repo.health.recover()
    await repo.mark_delivered(CID, stored[-1].seq, 0, sending=True)  # its request goes out
    mark = await inner.store.delivery_mark(CID)  # what Redis holds (no resend reading it)
    assert mark == DeliveryMark(after=2, seq=4, parts=0, sending=True)
    await repo.mark_delivered(CID, stored[-1].seq)  # Telegram took it
    assert await inner.store.delivery_mark(CID) is None
    assert await repo.undelivered("tg") == []


async def resend(repo: ResilientRepository, cid: ConversationId) -> list[int]:
    """What the outbox's resend does (bot/outbox.py `flush`, start-up's sweep): the mark
    read, each answer after it sent with its messages marked as Telegram takes them, by the
    seqs read; the seqs it sent."""
    mark = await repo.delivery_mark(cid)
    assert mark is not None
    sent = []
    async for message in repo.iter_messages(cid, mark.after):
        if message.role == "assistant" and message.delivery is not None:
            await repo.mark_delivered(cid, message.seq, mark.sent(message.seq), sending=True)
            assert await repo.delivery_mark(cid) == DeliveryMark(
                after=mark.after, seq=message.seq, parts=0, sending=True
            )
            await repo.mark_delivered(cid, message.seq)
            sent.append(message.seq)
    return sent


@pytest.mark.parametrize("earlier", [0, 2, 4])
async def test_an_answer_spooled_and_not_sent_is_resent_by_the_seq_redis_gave_it(
    repo: ResilientRepository, inner: Switchable, earlier: int
) -> None:
    """A turn spooled while Redis is down (provisional seqs 1, 2), its answer's sending
    failing with an error that passes (its first request's mark not made: Redis down; no
    more marks). Redis comes back and the turn is written (seqs after the `earlier` ones);
    the resend (start-up's sweep, trying again) reads the mark and the answer by the seqs
    Redis gave: its marks must name that answer, not what the provisional seqs would map
    to, or it is sent again with every next message (or another answer is skipped)."""
    for i in range(earlier // 2):
        done = Message(role="assistant", content=f"re: {i}", delivery=Delivery())
        stored = await repo.append(CID, [Message(role="user", content=str(i)), done])
        await repo.mark_delivered(CID, stored[-1].seq)
    inner.down = True
    answer = Message(role="assistant", content="re: now", delivery=Delivery())
    stored = await repo.append(CID, [Message(role="user", content="now"), answer])
    assert [m.seq for m in stored] == [1, 2]  # provisional
    await repo.mark_delivered(CID, stored[-1].seq, 0, sending=True)  # not made: down
    # ... and Telegram's answer is an error that passes: the answer is left to send.
    inner.down = False
    assert await repo.health.recover()
    assert await repo.undelivered("tg") == [CID]

    assert await resend(repo, CID) == [earlier + 2]
    assert await inner.store.delivery_mark(CID) is None
    assert await repo.undelivered("tg") == []
    # The chat's next turn, answered and sent, leaves nothing either.
    later = Message(role="assistant", content="re: later", delivery=Delivery())
    stored = await repo.append(CID, [Message(role="user", content="later"), later])
    await repo.mark_delivered(CID, stored[-1].seq)
    assert await repo.undelivered("tg") == []


async def answered(repo: ResilientRepository, outbox: Outbox, text: str) -> None:
    """A Telegram turn: stored, then its answer delivered (bot/sinks.py, bot/outbox.py)."""
    answer = Message(role="assistant", content=f"re: {text}", delivery=Delivery())
    stored = await repo.append(TG, [Message(role="user", content=text), answer])
    await outbox.deliver(
        TG, answer.content, Delivery(), first_seq=stored[0].seq, seq=stored[-1].seq
    )


@pytest.mark.parametrize("back", ["before the next turn", "before its answer", "after it"])
async def test_an_answer_spooled_and_not_sent_is_not_lost_when_a_newer_one_is_sent(
    repo: ResilientRepository, inner: Switchable, tg: FakeTelegram, bot: Bot, back: str
) -> None:
    """While Redis is down an answer is stored (spooled) and its sending fails with an error
    that passes; the chat's next answer is sent. Whenever Redis comes back, marking the newer
    one delivered does not take the older one along: it reaches the chat, at the latest
    before the answer of the chat's next turn, and nothing is left to send."""
    outbox = Outbox(bot, repo)
    await answered(repo, outbox, "before")
    inner.down = True
    tg.fail_next("sendMessage", 500, "Internal Server Error", chat_id=TG_CHAT)
    with pytest.raises(TelegramServerError):
        await answered(repo, outbox, "one")
    if back == "before the next turn":
        inner.down = False
        assert await repo.health.recover()
    answer = Message(role="assistant", content="re: two", delivery=Delivery())
    stored = await repo.append(TG, [Message(role="user", content="two"), answer])
    if back == "before its answer":
        inner.down = False
        assert await repo.health.recover()
    await outbox.deliver(TG, "re: two", Delivery(), first_seq=stored[0].seq, seq=stored[-1].seq)
    if back == "after it":
        inner.down = False
        assert await repo.health.recover()
    await answered(repo, outbox, "three")
    seen = [m.text for m in tg.messages_to(TG_CHAT)]
    assert seen[0] == "re: before" and seen[-1] == "re: three"
    assert {"re: one", "re: two"} <= set(seen[1:-1])
    if back == "before the next turn":  # the next turn's own resend: in order, once
        assert seen == ["re: before", "re: one", "re: two", "re: three"]
    assert await repo.undelivered("tg") == []
    await answered(repo, outbox, "four")  # nothing older sent again
    assert [m.text for m in tg.messages_to(TG_CHAT)][len(seen) :] == ["re: four"]
