"""The runner over the file journal (QUEUE=local), without the bot: each chat's updates in
order, chats side by side, every update done once handled (a failed one too: the journal
does not retry, the bot apologised), and everything put answered before the runner stops.

tests/unit/intake/test_stream.py runs the same runner over the Redis stream."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from membot.bot.app import COMMANDS
from membot.core.service import ConversationService
from membot.intake.contract import Entry
from membot.intake.journal import INBOX, Journal
from membot.intake.runner import Runner
from membot.memory.inmemory import MemoryRepository


def photo(update_id: int, chat: int, album: str) -> dict[str, Any]:
    message = {
        "message_id": update_id,
        "date": 0,
        "chat": {"id": chat, "type": "private"},
        "media_group_id": album,
        "photo": [{"file_id": f"p{update_id}", "file_unique_id": "u", "width": 1, "height": 1}],
    }
    return {"update_id": update_id, "message": message}


def text(update_id: int, chat: int, words: str = "hi") -> dict[str, Any]:
    message = {
        "message_id": update_id,
        "date": 0,
        "chat": {"id": chat, "type": "private"},
        "text": words,
    }
    return {"update_id": update_id, "message": message}


class Handler:
    """Records (chat, update id); a chat in `held` waits until released; `fail` raises."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []
        self.albums: list[list[int]] = []  # the update ids of each call
        self.held: dict[str, asyncio.Event] = {}
        self.fail: set[int] = set()
        self.changed = asyncio.Event()

    async def __call__(self, entry: Entry, *parts: Entry) -> None:
        if entry.update_id in self.fail:
            raise RuntimeError("a handler bug")
        self.seen.append((entry.chat, entry.update_id))
        self.albums.append([entry.update_id, *(p.update_id for p in parts)])
        self.changed.set()
        gate = self.held.get(entry.chat)
        if gate is not None:
            await gate.wait()

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(10):
            while len(self.seen) < count:
                self.changed.clear()
                await self.changed.wait()


@pytest.fixture
async def journal(tmp_path: Path) -> AsyncIterator[Journal]:
    journal = Journal(tmp_path, commands=COMMANDS)
    yield journal
    await journal.close()


@pytest.fixture
async def handler() -> Handler:
    return Handler()


@pytest.fixture
async def runner(journal: Journal, handler: Handler) -> AsyncIterator[Runner]:
    repository = MemoryRepository()
    service = ConversationService(None, repository, consult_rounds=3, max_rounds=10)  # type: ignore[arg-type]
    made = Runner(journal, handler, turns=service, repository=repository)
    await journal.start()
    await made.start()
    yield made
    await made.stop(grace=5)
    await journal.close()


async def test_a_chat_in_order_and_chats_side_by_side(
    journal: Journal, handler: Handler, runner: Runner, tmp_path: Path
) -> None:
    handler.held["1"] = asyncio.Event()  # chat 1's first answer takes its time
    await journal.put([text(1, 1), text(2, 2), text(3, 1), text(4, 2)])
    await handler.wait_for(3)
    assert handler.seen == [("1", 1), ("2", 2), ("2", 4)]  # chat 2 did not wait for chat 1
    handler.held["1"].set()
    await handler.wait_for(4)
    assert [u for c, u in handler.seen if c == "1"] == [1, 3]
    await runner.stop(grace=5)
    await journal.close()  # as the process shuts down: the runner, then its intake
    assert (tmp_path / INBOX).read_text() == ""  # every update done: nothing to replay


async def test_a_failed_update_is_done_and_the_chat_goes_on(
    journal: Journal, handler: Handler, runner: Runner, tmp_path: Path, caplog: Any
) -> None:
    handler.fail.add(1)
    with caplog.at_level(logging.ERROR, logger="membot.intake.runner"):
        await journal.put([text(1, 1), text(2, 1)])
        await handler.wait_for(1)
        await runner.stop(grace=5)
    await journal.close()
    assert handler.seen == [("1", 2)]  # not tried again
    assert "update 1 failed (RuntimeError)" in caplog.text
    assert (tmp_path / INBOX).read_text() == ""


async def test_everything_put_is_answered_before_the_runner_stops(
    journal: Journal, handler: Handler, runner: Runner
) -> None:
    handler.held["1"] = asyncio.Event()
    await journal.put([text(1, 1), text(2, 1), text(3, 1)])
    await handler.wait_for(1)
    stopping = asyncio.create_task(runner.stop(grace=5))
    await asyncio.sleep(0)  # stop() begins while the first turn is in progress
    handler.held["1"].set()
    await stopping
    assert handler.seen == [("1", 1), ("1", 2), ("1", 3)]  # the journal leaves nothing behind


async def test_an_albums_parts_are_one_call_gathered_until_none_more_comes(
    journal: Journal, handler: Handler, runner: Runner, tmp_path: Path
) -> None:
    # The album's parts arrive in two batches (as Telegram may send them), a text after it.
    await journal.put([photo(1, 1, "a"), photo(2, 1, "a")])
    await journal.put([photo(3, 1, "a"), text(4, 1)])
    await journal.put([photo(5, 2, "b"), photo(6, 2, "c")])  # two albums of one photo
    await handler.wait_for(4)
    by_chat = sorted(handler.albums)
    assert by_chat == [[1, 2, 3], [4], [5], [6]]
    assert handler.albums.index([1, 2, 3]) < handler.albums.index([4])  # in order
    await runner.stop(grace=5)
    await journal.close()  # as the process shuts down: the runner, then its intake
    assert (tmp_path / INBOX).read_text() == ""  # every part done
    assert runner.handled == 6


def stop_update(update_id: int, chat: int, draft_id: int) -> dict[str, Any]:
    stopped = {"chat": {"id": chat, "type": "private"}, "draft_id": draft_id}
    return {"update_id": update_id, "stopped_message_generation": stopped}


async def test_a_stop_reaches_the_answer_while_its_turn_holds_the_chat(
    journal: Journal, tmp_path: Path
) -> None:
    """Control updates take no lane and no turn: the turn they stop holds both. They are
    never journaled; a stop for nothing in progress, or for another draft, is ignored."""
    repository = MemoryRepository()
    service = ConversationService(None, repository, consult_rounds=3, max_rounds=10)  # type: ignore[arg-type]
    writing: asyncio.Queue[int] = asyncio.Queue()
    stopped: asyncio.Queue[int] = asyncio.Queue()

    async def answer(entry: Entry, *parts: Entry) -> None:
        with service.stops.register(5, 10 + entry.update_id) as stop:
            writing.put_nowait(entry.update_id)
            await stop.wait()  # the answer goes on until the user stops it
        stopped.put_nowait(entry.update_id)

    handed: asyncio.Queue[tuple[int, int, bool]] = asyncio.Queue()

    def stops(chat_id: int, draft_id: int) -> bool:
        found = service.stops.stop(chat_id, draft_id)
        handed.put_nowait((chat_id, draft_id, found))
        return found

    runner = Runner(journal, answer, turns=service, repository=repository, stops=stops)
    await journal.start()
    await runner.start()
    try:
        async with asyncio.timeout(10):
            await journal.put([stop_update(1, 5, 12)])  # nothing in progress yet: ignored
            assert await handed.get() == (5, 12, False)
            await journal.put([text(2, 5, "plan my year"), text(3, 5, "and then?")])
            assert await writing.get() == 2
            await journal.put([stop_update(4, 5, 13), stop_update(5, 6, 12)])  # not this one
            assert [await handed.get() for _ in range(2)] == [(5, 13, False), (6, 12, False)]
            assert stopped.empty()  # the answer goes on
            await journal.put([stop_update(6, 5, 12)])
            assert await stopped.get() == 2
            assert await writing.get() == 3  # the chat goes on: its next update, in turn
            await journal.put([stop_update(7, 5, 13)])
            assert await stopped.get() == 3
        assert "stopped_message_generation" not in (tmp_path / INBOX).read_text()
    finally:
        await runner.stop(grace=5)
        await journal.close()


@pytest.mark.parametrize("hurried", [False, True], ids=["grace-over", "second-signal"])
async def test_a_turn_cut_short_by_shutdown_is_replayed_at_the_next_start(
    journal: Journal, handler: Handler, runner: Runner, tmp_path: Path, caplog: Any, hurried: bool
) -> None:
    """What the shutdown cuts short (its grace over, or a second signal at once) is never
    marked done: the next run answers it, as `kill -9` would have left it. The chat's update
    not started yet is kept too."""
    handler.held["1"] = asyncio.Event()  # an answer that takes longer than anyone waits
    await journal.put([text(1, 1, "plan my week"), text(2, 1, "and then?")])
    await handler.wait_for(1)
    hurry = asyncio.Event()
    if hurried:
        hurry.set()
    with caplog.at_level(logging.WARNING, logger="membot.intake.runner"):
        async with asyncio.timeout(5):  # hurried: at once, whatever the grace
            await runner.stop(grace=60 if hurried else 0.1, hurry=hurry)
    await journal.close()
    why = "the second signal" if hurried else "shutdown"
    assert f"2 update(s) cut short by {why}, left pending" in caplog.text

    after = Journal(tmp_path, commands=COMMANDS)
    replayed = await after.unanswered(MemoryRepository())
    assert [r["message"]["text"] for r in replayed] == ["plan my week", "and then?"]
