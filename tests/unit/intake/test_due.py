"""The clock as a source (intake/due.py): due tasks put into the intake as updates of their
chats, once, held while in flight, put again only if still due; journaled and replayed like
messages; ordered in their chat's lane after what came before them. The clock is injected:
`tick(now)` is one look at the store at `now`."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from membot.bot.app import COMMANDS
from membot.intake.contract import Entry
from membot.intake.due import DueSource
from membot.intake.journal import Journal
from membot.intake.lanes import Lanes
from membot.memory import FileRepository
from membot.schedule.inmemory import InMemoryTaskStore
from membot.schedule.models import Task, firing_of

T0 = datetime(2026, 3, 28, 8, 0, tzinfo=UTC)


def _task(task_id: str, due: datetime, chat: int = 5) -> Task:
    return Task(id=task_id, chat=chat, text="call the bank", due=due, zone="UTC", author=chat)


async def _taken(journal: Journal) -> list[Entry]:
    return await asyncio.wait_for(journal.take(100), 1.0)


async def test_a_due_task_is_put_once_and_held_while_its_turn_is_in_flight(
    tmp_path: Path,
) -> None:
    store, journal = InMemoryTaskStore(), Journal(tmp_path, commands=COMMANDS)
    await store.add(_task("aaaa1111", T0), 50)
    await store.add(_task("bbbb2222", T0 + timedelta(hours=1)), 50)
    due = DueSource(store, journal, refire=300)

    assert await due.tick(T0 - timedelta(seconds=1)) == 0
    assert await due.tick(T0) == 1
    [entry] = await _taken(journal)
    firing = firing_of(json.loads(entry.data))
    assert firing is not None and (firing.task, firing.due, entry.chat) == ("aaaa1111", T0, "5")
    assert entry.update_id < 0
    # In flight: not put again until the hold is over, and then only if still due.
    assert await due.tick(T0 + timedelta(seconds=299)) == 0
    assert await store.next_time() == T0 + timedelta(seconds=300)
    assert await due.tick(T0 + timedelta(seconds=300)) == 1
    await store.advance(5, "aaaa1111", T0, None)  # its turn ran
    assert await due.tick(T0 + timedelta(seconds=900)) == 0


async def test_a_firing_is_journaled_and_replayed_after_a_crash(tmp_path: Path) -> None:
    store = InMemoryTaskStore()
    await store.add(_task("aaaa1111", T0), 50)
    await DueSource(store, Journal(tmp_path, commands=COMMANDS)).tick(T0)
    # The process dies before the turn: the next one's journal hands it out first.
    journal = Journal(tmp_path, commands=COMMANDS, repository=FileRepository(tmp_path))
    await journal.start()
    [entry] = await _taken(journal)
    firing = firing_of(json.loads(entry.data))
    assert firing is not None and firing.task == "aaaa1111"


async def test_a_firing_done_is_not_replayed(tmp_path: Path) -> None:
    store = InMemoryTaskStore()
    await store.add(_task("aaaa1111", T0), 50)
    journal = Journal(tmp_path, commands=COMMANDS)
    await DueSource(store, journal).tick(T0)
    [entry] = await _taken(journal)
    await journal.done(entry)
    await journal.close()

    again = Journal(tmp_path, commands=COMMANDS, repository=FileRepository(tmp_path))
    await again.start()
    assert again.rest() == []


async def test_many_tasks_due_at_once_go_in_batches(tmp_path: Path) -> None:
    store, journal = InMemoryTaskStore(), Journal(tmp_path, commands=COMMANDS)
    for i in range(25):
        await store.add(_task(f"t{i:07d}", T0, chat=100 + i), 50)
    due = DueSource(store, journal, batch=10)
    assert [await due.tick(T0) for _ in range(4)] == [10, 10, 5, 0]
    assert len({e.chat for e in await _taken(journal)}) == 25


async def test_a_task_keeps_its_place_among_its_chats_updates() -> None:
    # A webhook may deliver Telegram's updates out of order, so a lane sorts them by id;
    # a task comes from the clock with an id of its own, and keeps its place by arrival.
    ran: list[int] = []
    gate = asyncio.Event()

    async def run(entry: Entry) -> None:
        await gate.wait()
        ran.append(entry.update_id)

    lanes = Lanes(run, lambda e: None, stopping=asyncio.Event(), freed=asyncio.Event())
    for update_id in (10, 12, -7, 11, 13):
        lanes.add(Entry(0, str(update_id), update_id, "5", "{}", redelivered=False))
    gate.set()
    while lanes.tasks:
        await asyncio.gather(*lanes.tasks.values())
    assert ran == [10, 12, -7, 11, 13]


async def test_a_firing_replayed_after_a_crash_is_put_again_if_its_turn_failed(
    tmp_path: Path,
) -> None:
    # The crashed run journaled the firing; the next one replays it, and its turn fails for
    # a passing reason (the journal forgets a failed update). Still due after its hold, the
    # task is put again: the journal must not take it for Telegram's redelivery of an update
    # the crashed run had (it is the clock's, and its turn checks whether it ran).
    store = InMemoryTaskStore()
    await store.add(_task("aaaa1111", T0), 50)
    await DueSource(store, Journal(tmp_path, commands=COMMANDS)).tick(T0)
    journal = Journal(tmp_path, commands=COMMANDS, repository=FileRepository(tmp_path))
    await journal.start()
    [replayed] = await _taken(journal)
    await journal.done(replayed)  # its turn failed: not run, the task not moved

    due = DueSource(store, journal, refire=300)
    assert await due.tick(T0 + timedelta(seconds=300)) == 1
    [again] = await _taken(journal)
    firing = firing_of(json.loads(again.data))
    assert firing is not None and (firing.task, firing.due) == ("aaaa1111", T0)
