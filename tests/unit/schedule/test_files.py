"""The file backend of tasks beyond the contract: where a chat's tasks are on disk and how,
the index of due times (built by start() while tasks change, small whatever the number of
tasks), and a /reset of the chat's memory, which removes the chat's directory, before or
after its tasks are cleared."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from membot.ids import ConversationId
from membot.memory import FileRepository, Message
from membot.schedule.files import FileTaskStore
from membot.schedule.index import DueIndex
from membot.schedule.models import Task, new_task_id
from tests.private_files import mode, open_to_others, usual_umask

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)


def task(chat: int = 1, at: datetime = T0, text: str = "call the bank") -> Task:
    return Task(new_task_id(), chat, text, at, "UTC", created=T0 - timedelta(days=1))


async def test_a_chats_tasks_are_its_directorys_tasks_json_written_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = FileTaskStore(data)
    first, second = task(at=T0 + MINUTE), task(text="«ask» how it went")
    with usual_umask():
        await store.add(first, 50)
        await store.add(second, 50)
        await store.add(task(chat=-1001234), 50)
    path = data / "1" / "tasks.json"
    kept = json.loads(path.read_text(encoding="utf-8"))
    assert kept == {"version": 1, "tasks": [first.to_dict(), second.to_dict()]}
    assert "«ask»" in path.read_text(encoding="utf-8")  # readable, not escaped
    assert (data / "-1001234" / "tasks.json").is_file()
    assert open_to_others(data) == []
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert sorted(p.name for p in (data / "1").iterdir()) == ["tasks.json"]  # no temporaries
    # A chat's last task gone, so is its file.
    await store.clear(1)
    assert not path.exists()


async def test_tasks_sit_beside_the_chats_memory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    memory, tasks = FileRepository(data), FileTaskStore(data)
    cid = ConversationId.telegram(42)
    await tasks.add(task(chat=42), 50)  # set in a chat's first turn: before its archive
    await memory.append(cid, [Message(role="user", content="hi")])
    assert sorted(p.name for p in (data / "42").iterdir()) == [
        "messages.txt",
        "meta.json",
        "tasks.json",
    ]
    assert len(await memory.tail(cid, 10)) == 1
    assert await memory.conversations("tg") == [cid]


@pytest.mark.parametrize("order", ["tasks first", "memory first", "memory only"])
async def test_a_reset_and_the_index_agree_in_either_order(tmp_path: Path, order: str) -> None:
    data = tmp_path / "data"
    memory, store = FileRepository(data), FileTaskStore(data)
    await store.start()
    cid = ConversationId.telegram(7)
    await memory.append(cid, [Message(role="user", content="remind me")])
    for i in range(3):
        await store.add(task(chat=7, at=T0 + i * SECOND), 50)
    other = task(chat=8, at=T0 + MINUTE)
    await store.add(other, 50)
    if order == "tasks first":
        assert await store.clear(7) == 3
    await memory.reset(cid)
    if order == "memory first":
        assert await store.clear(7) == 0  # the file went with the directory
    assert await store.tasks(7) == []
    # Nothing of chat 7 is due, and the index moves on to what is.
    assert await store.due(T0 + timedelta(days=1), 10) == [other]
    assert await store.next_time() == T0 + MINUTE
    assert await store.chats() == [8]
    assert not (data / "7").exists()


async def test_start_builds_the_index_while_tasks_change(tmp_path: Path) -> None:
    data = tmp_path / "data"
    before = FileTaskStore(data)
    kept = {chat: task(chat=chat, at=T0 + chat * SECOND) for chat in range(1, 301)}
    for t in kept.values():
        await before.add(t, 50)
    store = FileTaskStore(data)
    scanning = asyncio.ensure_future(store.start())
    # Changed while the scan reads them (or before or after it does).
    await asyncio.gather(
        store.clear(1),
        store.remove(2, kept[2].id),
        store.advance(3, kept[3].id, kept[3].due, T0 + timedelta(days=1)),
        store.add(task(chat=4, at=T0 - MINUTE), 50),
        store.add(task(chat=1000, at=T0 - SECOND), 50),
        store.hold(kept[5], T0 + timedelta(hours=1)),
    )
    await scanning
    await store.start()  # once is enough; again is nothing
    assert await store.next_time() == T0 - MINUTE
    due = await store.due(T0 + 10 * SECOND, 100)
    assert [(t.chat, t.due) for t in due] == [
        (4, T0 - MINUTE),
        (1000, T0 - SECOND),
        (4, T0 + 4 * SECOND),
        *((chat, T0 + chat * SECOND) for chat in range(6, 11)),
    ]
    assert (await store.get(3, kept[3].id)) == kept[3].moved(T0 + timedelta(days=1))
    assert await store.chats() == [3, 4, *range(5, 301), 1000]


async def test_due_reads_only_the_chats_whose_time_has_come(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    store = FileTaskStore(data)
    for chat in range(1, 101):
        await store.add(task(chat=chat, at=T0 + chat * MINUTE), 50)
    restarted = FileTaskStore(data)
    await restarted.start()
    # A file that would say so (a WARNING) if it were read.
    (data / "50" / "tasks.json").write_bytes(b"not json")
    with caplog.at_level("WARNING"):
        due = await restarted.due(T0 + 3 * MINUTE, 10)
        assert [t.chat for t in due] == [1, 2, 3]
        assert caplog.records == []
        due = await restarted.due(T0 + 60 * MINUTE, 100)
        assert [t.chat for t in due] == [*range(1, 50), 51, 52, 53, 54, 55, 56, 57, 58, 59, 60]
    assert {r.getMessage() for r in caplog.records} == {
        "chat 50: its tasks.json does not read (JSONDecodeError)"
    }
    # Its entry is gone with what it read: the clock does not come back for it.
    caplog.clear()
    assert [t.chat for t in await restarted.due(T0 + 60 * MINUTE, 100)][48:] == [49, *range(51, 61)]
    assert caplog.records == []


def test_the_index_keeps_one_entry_per_chat() -> None:
    index = DueIndex()
    for round_ in range(50):  # chats moved again and again: stale entries do not pile up
        for chat in range(100):
            index.set(chat, T0 + (chat + round_) * SECOND)
    assert len(index) == 100
    assert len(index._heap) <= 2 * 100 + 64
    assert index.next_time() == T0 + 49 * SECOND
    assert index.due_chats(T0 + 51 * SECOND) == [0, 1, 2]
    index.set(1, None)
    assert index.due_chats(T0 + 51 * SECOND) == [0, 2]
