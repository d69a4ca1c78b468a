"""The task store contract (schedule/store.py), run over every backend: in memory, files and
Redis. A new backend joins by adding itself to the `store` fixture's params.

Files under a temporary DATA_DIR; Redis the real server at 127.0.0.1:6379, each test under a
prefix of its own, deleted afterwards (tests/unit/conftest.py `prefix`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from membot.config import load_settings
from membot.redis.client import create_client
from membot.schedule.files import FileTaskStore
from membot.schedule.inmemory import InMemoryTaskStore
from membot.schedule.models import Task, new_task_id
from membot.schedule.redis import RedisTaskStore
from membot.schedule.store import TaskStore
from membot.wiring import Core, build_core
from tests.scripted import ScriptedModel

REDIS_URL = "redis://127.0.0.1:6379/0"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)

Reopen = Callable[[], Awaitable[TaskStore]]


def task(chat: int = 1, at: datetime = T0, text: str = "call the bank", **kw: object) -> Task:
    return Task(
        id=new_task_id(),
        chat=chat,
        text=text,
        due=at,
        zone="Europe/Berlin",
        created=T0 - timedelta(days=1),
        **kw,  # type: ignore[arg-type]
    )


class Stores:
    """The backend under test, and more instances over the same data (a restart, another
    process)."""

    def __init__(self, kind: str, data: Path, prefix: str) -> None:
        self.kind, self.data, self.prefix = kind, data, prefix
        self.made: list[TaskStore] = []
        self.clients: list[object] = []

    async def open(self) -> TaskStore:
        store: TaskStore
        if self.kind == "memory":
            store = InMemoryTaskStore()
        elif self.kind == "files":
            store = FileTaskStore(self.data)
        else:
            client = create_client(REDIS_URL)
            self.clients.append(client)
            store = RedisTaskStore(client, self.prefix)
        await store.start()
        self.made.append(store)
        return store

    async def close(self) -> None:
        for store in self.made:
            await store.close()
        for client in self.clients:
            await client.aclose()  # type: ignore[attr-defined]


@pytest.fixture(params=["memory", "files", "redis"])
async def stores(
    request: pytest.FixtureRequest, tmp_path: Path, prefix: str
) -> AsyncIterator[Stores]:
    made = Stores(request.param, tmp_path / "data", prefix)
    try:
        yield made
    finally:
        await made.close()


@pytest.fixture
async def store(stores: Stores) -> TaskStore:
    opened = await stores.open()
    assert isinstance(opened, TaskStore)
    return opened


async def test_a_task_added_is_there_as_it_was_set(store: TaskStore) -> None:
    full = task(author=7, name="Ann", repeat="FREQ=DAILY", anchor="2026-03-01T10:00:00", thread=3)
    bare = task(at=T0 + MINUTE, text="ask how it went — «ok»?")
    assert await store.add(full, 50)
    assert await store.add(bare, 50)
    assert await store.get(1, full.id) == full
    assert await store.get(1, bare.id) == bare
    assert await store.get(1, new_task_id()) is None
    assert await store.get(2, full.id) is None  # another chat's id is not this chat's task
    assert await store.tasks(2) == []


async def test_a_chats_tasks_come_soonest_first(store: TaskStore) -> None:
    later, sooner, soonest = task(at=T0 + MINUTE), task(at=T0 + SECOND), task(at=T0)
    for t in (later, sooner, soonest):
        assert await store.add(t, 50)
    assert await store.add(task(chat=2), 50)
    assert [t.id for t in await store.tasks(1)] == [soonest.id, sooner.id, later.id]


async def test_a_chat_keeps_no_more_than_its_limit(store: TaskStore) -> None:
    kept = [task(at=T0 + i * SECOND) for i in range(3)]
    for t in kept:
        assert await store.add(t, 3)
    refused = task(at=T0 - MINUTE)
    assert not await store.add(refused, 3)
    assert await store.get(1, refused.id) is None
    assert [t.id for t in await store.tasks(1)] == [t.id for t in kept]
    assert [t.id for t in await store.due(T0 + MINUTE, 10)] == [t.id for t in kept]
    assert await store.add(task(chat=-100), 3)  # another chat has its own


async def test_adds_at_once_never_pass_the_limit(stores: Stores) -> None:
    # Two instances where the backend is shared by processes (Redis): its own clients.
    first = await stores.open()
    second = await stores.open() if stores.kind == "redis" else first
    adds = [(first, second)[i % 2].add(task(at=T0 + i * SECOND), 5) for i in range(30)]
    done = await asyncio.gather(*adds)
    assert done.count(True) == 5
    assert len(await first.tasks(1)) == 5
    assert len(await first.due(T0 + MINUTE, 100)) == 5


async def test_a_task_removed_is_gone_everywhere(store: TaskStore) -> None:
    gone, stays = task(), task(at=T0 + SECOND)
    await store.add(gone, 50)
    await store.add(stays, 50)
    assert await store.remove(1, gone.id) == gone
    assert await store.remove(1, gone.id) is None
    assert await store.get(1, gone.id) is None
    assert await store.tasks(1) == [stays]
    assert await store.due(T0 + MINUTE, 10) == [stays]
    assert await store.next_time() == T0 + SECOND
    assert await store.remove(1, stays.id) == stays
    assert await store.next_time() is None
    assert await store.chats() == []


async def test_advance_moves_a_task_only_from_the_time_it_is_at(store: TaskStore) -> None:
    daily = task(repeat="FREQ=DAILY", anchor="2026-03-01T10:00:00")
    await store.add(daily, 50)
    tomorrow = T0 + timedelta(days=1)
    # Not at that time: nothing changes.
    assert not await store.advance(1, daily.id, T0 - SECOND, tomorrow)
    assert not await store.advance(1, new_task_id(), T0, tomorrow)
    assert await store.get(1, daily.id) == daily
    assert await store.due(T0, 10) == [daily]
    # At it: moved, once.
    assert await store.advance(1, daily.id, T0, tomorrow)
    assert not await store.advance(1, daily.id, T0, tomorrow)
    assert await store.get(1, daily.id) == daily.moved(tomorrow)
    assert await store.due(T0 + timedelta(hours=1), 10) == []
    assert await store.next_time() == tomorrow
    assert await store.due(tomorrow, 10) == [daily.moved(tomorrow)]
    # No next time: the task ends.
    assert await store.advance(1, daily.id, tomorrow, None)
    assert await store.get(1, daily.id) is None
    assert await store.tasks(1) == []
    assert await store.next_time() is None


async def test_one_of_two_advances_at_once_wins(stores: Stores) -> None:
    first = await stores.open()
    second = await stores.open() if stores.kind == "redis" else first
    once = task()
    await first.add(once, 50)
    done = await asyncio.gather(
        *(s.advance(1, once.id, T0, T0 + i * MINUTE) for i, s in enumerate([first, second] * 4, 1))
    )
    assert done.count(True) == 1
    [moved] = await second.tasks(1)
    assert moved.due == T0 + (done.index(True) + 1) * MINUTE


async def test_clear_drops_every_task_of_the_chat_only(store: TaskStore) -> None:
    for i in range(3):
        await store.add(task(at=T0 + i * SECOND), 50)
    other = task(chat=2, at=T0 + MINUTE)
    await store.add(other, 50)
    assert await store.clear(1) == 3
    assert await store.clear(1) == 0
    assert await store.tasks(1) == []
    assert await store.due(T0 + timedelta(days=1), 10) == [other]
    assert await store.next_time() == T0 + MINUTE
    assert await store.chats() == [2]


async def test_due_finds_the_soonest_tasks_whose_time_has_come(store: TaskStore) -> None:
    assert await store.next_time() is None
    assert await store.due(T0, 10) == []
    tasks = [task(chat=1 + i % 7, at=T0 + i * SECOND) for i in range(20)]
    for t in reversed(tasks):
        await store.add(t, 50)
    assert await store.next_time() == T0
    assert await store.due(T0 - SECOND, 10) == []
    assert await store.due(T0 + 4 * SECOND, 10) == tasks[:5]
    assert await store.due(T0 + MINUTE, 3) == tasks[:3]
    assert await store.due(T0 + MINUTE, 100) == tasks
    assert await store.due(T0 + MINUTE, 0) == []


async def test_a_held_task_is_left_out_until_its_hold_ends(store: TaskStore) -> None:
    first, second = task(), task(chat=2, at=T0 + 30 * SECOND)
    third = task(at=T0 + MINUTE)
    for t in (first, second, third):
        await store.add(t, 50)
    await store.hold(first, T0 + 5 * MINUTE)
    assert await store.due(T0 + MINUTE, 10) == [second, third]
    assert await store.next_time() == T0 + 30 * SECOND
    await store.hold(second, T0 + 5 * MINUTE)
    await store.hold(third, T0 + 4 * MINUTE)
    assert await store.next_time() == T0 + 4 * MINUTE
    assert await store.due(T0 + 4 * MINUTE, 10) == [third]
    # Its hold over, a firing that got lost is due again.
    assert await store.due(T0 + 5 * MINUTE, 10) == [first, second, third]
    # Moving a task ends its hold: it is due at its new time.
    assert await store.advance(1, first.id, T0, T0 + 2 * MINUTE)
    assert await store.due(T0 + 2 * MINUTE, 10) == [first.moved(T0 + 2 * MINUTE)]
    # The later hold wins: an earlier one changes nothing.
    await store.hold(third, T0 + 3 * MINUTE)
    await store.hold(third, T0 - MINUTE)
    assert await store.due(T0 + 3 * MINUTE, 10) == [first.moved(T0 + 2 * MINUTE)]
    assert await store.due(T0 + 4 * MINUTE, 10) == [third, first.moved(T0 + 2 * MINUTE)]
    # A hold after its task was moved (a stale one) does not bring it back sooner.
    assert await store.advance(1, third.id, third.due, T0 + timedelta(days=1))
    await store.hold(third, T0 + 10 * MINUTE)
    assert third.id not in {t.id for t in await store.due(T0 + 20 * MINUTE, 10)}
    # A task gone is not held.
    await store.remove(2, second.id)
    await store.hold(second, T0 + timedelta(days=1))
    assert await store.get(2, second.id) is None
    await store.clear(1)
    assert await store.next_time() is None


async def test_a_hold_that_comes_after_the_turn_moved_the_task_does_not_delay_it(
    store: TaskStore,
) -> None:
    # The clock puts a firing, then holds its task; the firing's turn may be over before
    # the hold is written (a quick turn, a late task whose next time is minutes away). That
    # hold is of the time carried out, not of the next: the task comes at its next time.
    often = task(repeat="FREQ=MINUTELY;INTERVAL=2", anchor="2026-03-01T10:00:00")
    await store.add(often, 50)
    nxt = T0 + 2 * MINUTE
    assert await store.advance(1, often.id, T0, nxt)
    await store.hold(often, T0 + 5 * MINUTE)
    assert await store.due(nxt, 10) == [often.moved(nxt)]
    assert await store.next_time() == nxt
    # Held at the time it is at, it is held.
    await store.hold(often.moved(nxt), T0 + 5 * MINUTE)
    assert await store.due(T0 + 4 * MINUTE, 10) == []


async def test_a_batch_is_held_in_one_go_and_only_tasks_still_at_their_time(
    store: TaskStore,
) -> None:
    # The clock holds a whole batch of firings at once (a thousand tasks due together).
    a, b, c = task(), task(chat=2), task(chat=2, at=T0 + SECOND)
    for t in (a, b, c):
        await store.add(t, 50)
    assert await store.advance(2, c.id, c.due, T0 + 2 * MINUTE)  # its turn ran meanwhile
    await store.hold_all([a, b, c], T0 + 5 * MINUTE)
    assert await store.due(T0 + 4 * MINUTE, 10) == [c.moved(T0 + 2 * MINUTE)]
    later = await store.due(T0 + 5 * MINUTE, 10)
    assert sorted(later, key=lambda t: t.id) == sorted(
        [a, b, c.moved(T0 + 2 * MINUTE)], key=lambda t: t.id
    )
    await store.hold_all([], T0)


async def test_chats_are_those_with_tasks(store: TaskStore) -> None:
    assert await store.chats() == []
    for chat in (5, -1001234567890, 3, 5):
        await store.add(task(chat=chat), 50)
    assert await store.chats() == [-1001234567890, 3, 5]
    await store.clear(3)
    assert await store.chats() == [-1001234567890, 5]


async def test_put_all_keeps_tasks_as_they_are(store: TaskStore) -> None:
    kept = task()
    await store.add(kept, 50)
    edited = replace(kept, text="call the bank at 10", due=T0 + MINUTE)
    copies = [edited, *(task(chat=2, at=T0 + i * SECOND) for i in range(4))]
    await store.put_all(copies)
    assert await store.tasks(1) == [edited]
    assert len(await store.tasks(2)) == 4
    assert not await store.add(task(chat=2), 4)  # put_all has no limit; add still has
    assert await store.due(T0 + MINUTE, 10) == sorted(copies, key=lambda t: (t.due, t.id))
    await store.put_all([])


@pytest.mark.parametrize("stores", ["files", "redis"], indirect=True)  # memory: one instance
async def test_another_instance_over_the_same_data_sees_the_tasks(stores: Stores) -> None:
    first = await stores.open()
    tasks = [task(chat=1 + i % 3, at=T0 + i * SECOND) for i in range(9)]
    for t in tasks:
        await first.add(t, 50)
    await first.advance(1, tasks[0].id, T0, T0 + timedelta(days=1))
    await first.remove(2, tasks[1].id)
    # A restart (files: the index built again by start()), or another process (Redis).
    second = await stores.open()
    assert await second.next_time() == T0 + 2 * SECOND
    assert await second.due(T0 + MINUTE, 100) == tasks[2:]
    assert await second.tasks(1) == [*tasks[3::3], tasks[0].moved(T0 + timedelta(days=1))]
    assert await second.chats() == [1, 2, 3]


# -- files: a tasks.json that does not read ------------------------------------------------


async def test_a_tasks_file_that_does_not_read_is_said_and_kept_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    (data / "5").mkdir(parents=True)
    broken = b'{"version": 1, "tasks": [{"id": "secret words", "text": "my PIN is 1234"'
    (data / "5" / "tasks.json").write_bytes(broken)
    fine = FileTaskStore(data)
    await fine.add(task(chat=6), 50)
    store = FileTaskStore(data)
    with caplog.at_level("WARNING"):
        await store.start()
        assert await store.tasks(5) == []
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert said and all("chat 5" in line for line in said)
    assert not any("PIN" in line or "secret" in line for line in said)
    assert await store.chats() == [6]  # the other chats are read as ever
    assert await store.next_time() == T0
    # Reading does not move it; the first write does, and never over it.
    assert (data / "5" / "tasks.json").read_bytes() == broken
    new = task(chat=5, at=T0 + MINUTE)
    assert await store.add(new, 50)
    [aside] = (data / "5").glob("tasks.json.corrupt-*")
    assert aside.read_bytes() == broken
    assert await store.tasks(5) == [new]
    assert await FileTaskStore(data).tasks(5) == [new]


# -- wiring: the store STORAGE names, on the process's client ----------------------------------


@pytest.mark.parametrize("storage", ["files", "redis"])
async def test_the_core_keeps_tasks_where_storage_says(
    storage: str, tmp_path: Path, prefix: str
) -> None:
    def core() -> Core:
        settings = load_settings(
            telegram=False,
            _env_file=None,
            openrouter_api_key="sk-test",
            data_dir=tmp_path / "data",
            storage=storage,
            redis_url=REDIS_URL,
            redis_prefix=prefix,
        )
        return build_core(settings, model=ScriptedModel())

    first = core()
    kind = FileTaskStore if storage == "files" else RedisTaskStore
    assert isinstance(first.task_store, kind)
    if isinstance(first.task_store, RedisTaskStore):
        assert first.task_store.client is first.redis
        assert first.task_store.prefix == prefix
    kept = task(chat=42)
    assert await first.task_store.add(kept, 50)
    await first.aclose()
    # A restart finds it: on disk, or in Redis.
    again = core()
    await again.task_store.start()
    assert await again.task_store.due(T0, 10) == [kept]
    await again.aclose()
