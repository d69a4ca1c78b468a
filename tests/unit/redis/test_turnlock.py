"""The conversation's turn across processes (STORAGE=redis), against the real Redis.

Two `ConversationService`s with their own Redis clients stand for two processes; the
conversation's turn must be held by one of them at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest
from redis.asyncio import BlockingConnectionPool, Connection, Redis

from membot.core.service import ConversationBusy, ConversationService
from membot.ids import ConversationId
from membot.memory import MemoryRepository
from membot.redis.client import create_client
from membot.redis.health import ALWAYS_UP
from membot.redis.turnlock import RedisTurnLocks
from tests.redis_proxy import CuttingProxy

CID = ConversationId.telegram(4242)
REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
async def processes(prefix: str) -> AsyncIterator[list[ConversationService]]:
    clients = [Redis.from_url(REDIS_URL) for _ in range(2)]
    services = [
        # The agent is never called here: only the service's ordering is under test.
        ConversationService(
            None,  # type: ignore[arg-type]
            MemoryRepository(),
            consult_rounds=3,
            max_rounds=10,
            turn_locks=RedisTurnLocks(client, prefix, timeout=2.0, poll=0.01),
        )
        for client in clients
    ]
    yield services
    for client in clients:
        await client.aclose()


async def test_two_processes_never_hold_one_conversation_at_once(
    processes: list[ConversationService],
) -> None:
    inside = 0
    most = 0
    done: list[int] = []

    async def turn(n: int) -> None:
        nonlocal inside, most
        async with processes[n % 2].ordered(CID):
            inside += 1
            most = max(most, inside)
            for _ in range(5):  # a turn awaits things; let the others try their luck
                await asyncio.sleep(0)
            inside -= 1
            done.append(n)

    await asyncio.gather(*(turn(n) for n in range(10)))
    assert most == 1
    assert sorted(done) == list(range(10))
    # Each process keeps its own arrival order.
    assert [n for n in done if n % 2 == 0] == [0, 2, 4, 6, 8]
    assert [n for n in done if n % 2 == 1] == [1, 3, 5, 7, 9]


async def test_exclusive_is_refused_while_another_process_holds_the_turn(
    processes: list[ConversationService],
) -> None:
    first, second = processes
    held = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with first.ordered(CID):
            held.set()
            await release.wait()

    task = asyncio.create_task(holder())
    await held.wait()
    with pytest.raises(ConversationBusy):
        async with second.exclusive(CID):
            pass
    release.set()
    await task
    async with second.exclusive(CID):  # free again
        pass
    assert second.in_flight == 0


async def test_a_long_turn_keeps_its_lock_past_the_timeout(prefix: str) -> None:
    client = Redis.from_url(REDIS_URL)
    locks = RedisTurnLocks(client, prefix, timeout=0.3, poll=0.01)
    try:
        async with locks.hold(CID):
            # Longer than the lease: the turn re-arms it, so nobody else gets in meanwhile.
            await asyncio.sleep(0.8)
            assert await client.exists(locks.key(CID)) == 1
        assert await client.exists(locks.key(CID)) == 0
    finally:
        await client.aclose()


async def test_a_lock_left_by_a_killed_process_expires(prefix: str) -> None:
    client = Redis.from_url(REDIS_URL)
    locks = RedisTurnLocks(client, prefix, timeout=5.0, poll=0.01)
    try:
        # What a process killed in mid-turn leaves: a token nobody will release.
        await client.set(locks.key(CID), "dead-owner", px=300)
        async with locks.hold(CID):
            assert await client.get(locks.key(CID)) != b"dead-owner"
    finally:
        await client.aclose()


class Breaker:
    """Stands in for Redis's health object (membot.redis.health.Health)."""

    budget = 5.0

    def __init__(self) -> None:
        self.failures: list[BaseException] = []

    @property
    def available(self) -> bool:
        return not self.failures

    def failed(self, exc: BaseException, *, quiet: bool = False) -> None:
        self.failures.append(exc)

    async def close(self) -> None:
        return None


@pytest.mark.parametrize("resilient", [False, True], ids=["queue", "resilient"])
async def test_a_lock_whose_reply_was_lost_is_taken_without_waiting_for_it_to_expire(
    prefix: str, resilient: bool
) -> None:
    # The SET that takes the lock reaches Redis, its reply does not; the client sends it
    # again, which finds the lock held by its own token. Waiting for that lock to expire
    # would hold the conversation up for the whole timeout (CLAIM_IDLE, 30 s by default).
    proxy = CuttingProxy(6379)
    client = create_client(await proxy.start(), socket_timeout=5.0)
    health = Breaker()
    locks = RedisTurnLocks(
        client, prefix, timeout=60.0, poll=0.01, health=health if resilient else ALWAYS_UP
    )
    key = locks.key(CID)
    proxy.request, proxy.reply = key.encode(), b"+OK"
    try:
        async with asyncio.timeout(10):  # not the lock's 60 s
            async with locks.hold(CID):
                assert proxy.cut.is_set()  # the first reply was lost indeed
                assert health.failures == []
                assert await client.pttl(key) > 50_000  # held, taken again just now
        assert await client.exists(key) == 0  # and let go
    finally:
        await client.aclose()
        await proxy.close()


class Watched(Connection):
    """redis-py's connection, telling when a command naming `key` has been written: the
    moment redis-py's write (inside `asyncio.wait_for` with a socket timeout) has finished,
    and the coroutine that sent it has not resumed yet."""

    def __init__(self, *, key: bytes, written: asyncio.Event, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._key = key
        self._written = written

    async def _send_packed_command(self, command: Iterable[bytes]) -> None:
        parts = list(command)
        await super()._send_packed_command(parts)
        if any(self._key in part for part in parts):
            self._written.set()


async def test_a_turn_ends_when_it_ends_as_its_lock_is_being_renewed(prefix: str) -> None:
    # The turn ends the moment the keeper's renewal has been written, before the keeper
    # has resumed. On Python 3.11 the keeper's cancellation then lands in asyncio.wait_for
    # (around redis-py's write), which returns the write's result instead: a keeper stopped
    # only by its cancellation went on renewing the lock for ever, the turn never ended and
    # the chat's next updates waited behind it, with nothing logged.
    key = f"{prefix}lock:{CID}"
    written = asyncio.Event()
    pool = BlockingConnectionPool.from_url(
        REDIS_URL, socket_timeout=1.0, connection_class=Watched, key=key.encode(), written=written
    )
    client = Redis.from_pool(pool)
    locks = RedisTurnLocks(client, prefix, timeout=0.3, poll=0.01)
    try:
        async with asyncio.timeout(5):
            async with locks.hold(CID):
                written.clear()  # what took the lock; now the keeper's renewal
                await written.wait()
        assert await client.exists(key) == 0
    finally:
        await client.aclose()
