"""The Redis backend of tasks beyond the contract: its keys, a task that does not read, and
Redis not answering. Against the real Redis at 127.0.0.1:6379, under a prefix of the test's
own (tests/unit/conftest.py `prefix`)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from membot.errors import StorageUnavailable
from membot.redis.client import create_client
from membot.schedule.models import Task, new_task_id
from membot.schedule.redis import RedisTaskStore

REDIS_URL = "redis://127.0.0.1:6379/0"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
MS = 1_772_355_600_000  # T0 in epoch milliseconds


def task(chat: int = -5, at: datetime = T0) -> Task:
    return Task(new_task_id(), chat, "call the bank", at, "UTC", created=T0, author=7)


@pytest.fixture
async def store(prefix: str) -> AsyncIterator[RedisTaskStore]:
    client = create_client(REDIS_URL)
    yield RedisTaskStore(client, prefix)
    await client.aclose()


async def keys(store: RedisTaskStore) -> set[str]:
    return {key async for key in store.client.scan_iter(match=f"{store.prefix}*")}


async def test_a_task_is_a_hash_a_member_of_its_chats_set_and_of_the_due_set(
    store: RedisTaskStore,
) -> None:
    t = task()
    assert await store.add(t, 50)
    p = store.prefix
    assert await keys(store) == {f"{p}tasks:due", f"{p}task:-5:{t.id}", f"{p}tasks:-5"}
    assert await store.client.zrange(f"{p}tasks:due", 0, -1, withscores=True) == [
        (f"-5:{t.id}", MS)
    ]
    assert await store.client.hgetall(f"{p}task:-5:{t.id}") == {
        key: str(value) for key, value in t.to_dict().items()
    }
    assert await store.client.smembers(f"{p}tasks:-5") == {t.id}
    # A hold is the member's score, later.
    await store.hold(t, T0 + timedelta(minutes=5))
    assert await store.client.zscore(f"{p}tasks:due", f"-5:{t.id}") == MS + 300_000
    assert await store.advance(-5, t.id, T0, T0 + timedelta(days=1))
    assert await store.client.zscore(f"{p}tasks:due", f"-5:{t.id}") == MS + 86_400_000
    assert await store.client.hget(f"{p}task:-5:{t.id}", "due") == "2026-03-02T09:00:00.000Z"
    # Gone, nothing of it stays.
    assert await store.remove(-5, t.id) is not None
    assert await keys(store) == set()
    await store.add(t, 50)
    await store.clear(-5)
    assert await keys(store) == set()


async def test_a_task_that_does_not_read_is_said_and_not_fired_again_and_again(
    store: RedisTaskStore, caplog: pytest.LogCaptureFixture
) -> None:
    broken, fine = task(), task(chat=3, at=T0 + timedelta(minutes=1))
    await store.add(broken, 50)
    await store.add(fine, 50)
    await store.client.hset(store.task_key(-5, broken.id), "due", "my PIN is 1234")
    with caplog.at_level("WARNING"):
        assert await store.due(T0 + timedelta(hours=1), 10) == [fine]
    said = [r.getMessage() for r in caplog.records]
    assert said == ["chat -5: a task in Redis does not read; it is not fired"]
    # Out of the due set: the clock does not come back for it at once.
    assert await store.next_time() == fine.due
    assert await store.tasks(3) == [fine]
    assert await store.clear(-5) == 1


async def test_a_member_whose_task_is_gone_is_not_due_forever(store: RedisTaskStore) -> None:
    # A hash lost on its own (evicted under maxmemory, deleted by hand) left its member in
    # the due set: next_time stayed in the past and the clock looked again at once, forever.
    lost, fine = task(), task(chat=3, at=T0 + timedelta(minutes=1))
    await store.add(lost, 50)
    await store.add(fine, 50)
    await store.client.delete(store.task_key(-5, lost.id))
    assert await store.due(T0 + timedelta(hours=1), 10) == [fine]
    assert await store.next_time() == fine.due


async def test_redis_not_answering_is_storage_unavailable() -> None:
    with socket.socket() as unheard:  # bound, not listening: the connection is refused
        unheard.bind(("127.0.0.1", 0))
        client = create_client(f"redis://127.0.0.1:{unheard.getsockname()[1]}/0", retries=0)
        store = RedisTaskStore(client, "membot-test:nowhere:")
        try:
            calls = [
                store.add(task(), 50),
                store.get(1, new_task_id()),
                store.tasks(1),
                store.due(T0, 10),
                store.hold(task(), T0),
                store.next_time(),
                store.chats(),
                store.advance(1, new_task_id(), T0, None),
                store.clear(1),
                store.put_all([task()]),
            ]
            for pending in calls:
                with pytest.raises(StorageUnavailable):
                    await pending
        finally:
            await client.aclose()
