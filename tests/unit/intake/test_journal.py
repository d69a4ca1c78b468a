"""The journal (QUEUE=local): written before use, read back after a crash, emptied when done."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from aiogram.types import Update

from membot.bot.app import COMMANDS
from membot.ids import ConversationId
from membot.intake.contract import Entry
from membot.intake.journal import COMPACT_BYTES, INBOX, Journal
from membot.memory import FileRepository, Message


def opened(data_dir: Path) -> Journal:
    return Journal(data_dir, commands=COMMANDS)


def update(update_id: int, text: str, chat: int = 5, message_id: int | None = None) -> Any:
    return raw(update_id, text, chat, message_id)


def entry(update_id: int) -> Entry:
    return Entry(0, str(update_id), update_id, "5", "{}", redelivered=False)


def raw(update_id: int, text: str, chat: int = 5, message_id: int | None = None) -> dict[str, Any]:
    return {
        "update_id": update_id,
        "message": {
            "message_id": message_id or update_id,
            "date": 1_767_225_600,
            "chat": {"id": chat, "type": "private"},
            "from": {"id": chat, "is_bot": False, "first_name": "Ann"},
            "text": text,
        },
    }


async def test_a_batch_is_on_disk_when_put_returns(tmp_path: Path) -> None:
    journal = opened(tmp_path / "data")  # DATA_DIR does not exist yet on a first start
    await journal.put([update(1, "one"), update(2, "two")])
    lines = (tmp_path / "data" / INBOX).read_text().splitlines()
    assert [json.loads(line)["message"]["text"] for line in lines] == ["one", "two"]


def on_disk(path: Path) -> list[Any]:
    """Each line: an update id, or ("done", [ids])."""
    out: list[Any] = []
    for line in (path / INBOX).read_text().splitlines():
        record = json.loads(line)
        out.append(("done", record["done"]) if "done" in record else record["update_id"])
    return out


async def test_done_marks_ride_along_and_the_journal_holds_only_what_is_in_flight(
    tmp_path: Path,
) -> None:
    journal = opened(tmp_path)
    await journal.put([update(1, "one"), update(2, "two")])
    await journal.done(entry(1))
    await journal.put([update(3, "three")])
    assert on_disk(tmp_path) == [1, 2, ("done", [1]), 3]
    # Past COMPACT_BYTES the journal is rewritten with the updates still pending only.
    await journal.done(entry(3))
    await journal.put([update(4, "x" * COMPACT_BYTES)])
    assert on_disk(tmp_path) == [2, 4]
    # Once nothing is in flight, nothing handled stays on disk.
    await journal.done(entry(2))
    assert on_disk(tmp_path) == [2, 4]  # its done mark waits for the next batch
    await journal.done(entry(4))
    await journal.flush()  # the emptying is not waited for by `done`
    assert on_disk(tmp_path) == []
    await journal.put([update(5, "five")])
    assert on_disk(tmp_path) == [5]


async def test_what_is_put_after_a_rewrite_a_deletion_or_a_move_is_in_the_journal_on_disk(
    tmp_path: Path,
) -> None:
    """The journal keeps its file open between appends (intake/journal_files.py): a batch put
    after the journal was rewritten lands in the new file, not the one the rewrite replaced,
    and one put after the file was deleted or moved aside by hand is in a file made again.
    Any of them lost would be a message a crash then loses."""
    (tmp_path / INBOX).write_text(json.dumps(raw(7, "from the crashed run")) + "\n")
    journal = opened(tmp_path)
    await journal.replay(FileRepository(tmp_path))  # unanswered: rewritten at the next write
    await journal.put([update(8, "eight")])  # appended, then the journal rewritten
    await journal.put([update(9, "nine")])
    assert on_disk(tmp_path) == [7, 8, 9]
    (tmp_path / INBOX).unlink()
    await journal.put([update(10, "ten")])
    assert on_disk(tmp_path) == [10]
    (tmp_path / INBOX).rename(tmp_path / "inbox.bak")
    await journal.put([update(11, "eleven")])
    assert on_disk(tmp_path) == [11]
    (tmp_path / "empty").write_text("")
    (tmp_path / "empty").replace(tmp_path / INBOX)  # another file put in its place
    await journal.put([update(12, "twelve")])
    assert on_disk(tmp_path) == [12]
    await journal.close()


async def test_after_a_crash_only_unanswered_text_is_replayed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = FileRepository(tmp_path)
    await repo.append(
        ConversationId.telegram(5),
        [
            Message(role="user", content="answered", tg_message_id=11),
            Message(role="assistant", content="yes"),
        ],
    )
    records = [raw(10, "/reset"), raw(11, "answered"), raw(12, "unanswered"), raw(14, "done")]
    (tmp_path / INBOX).write_text(
        "".join(json.dumps(r) + "\n" for r in records)
        + json.dumps({"done": [14]})
        + "\n"
        + '{"update_id": 13, "mess'  # torn by the crash
    )
    journal = opened(tmp_path)
    with caplog.at_level(logging.WARNING):
        replay = await journal.unanswered(repo)
    assert [r["update_id"] for r in replay] == [12]
    assert "torn or corrupt line" in caplog.text
    # Telegram's redelivery of anything the crashed run journaled is not journaled again.
    assert journal.journaled_before == {10, 11, 12, 14}
    size = (tmp_path / INBOX).stat().st_size
    await journal.put([update(11, "answered")])
    assert (tmp_path / INBOX).stat().st_size == size
    # The first new batch leaves only what is pending: the replayed message and itself.
    await journal.put([update(15, "new")])
    assert on_disk(tmp_path) == [12, 15]
    await journal.done(entry(12))
    await journal.done(entry(15))
    await journal.flush()  # the emptying is not waited for by `done`
    assert on_disk(tmp_path) == []


async def test_a_journal_with_nothing_to_replay_is_emptied_at_start_up(tmp_path: Path) -> None:
    (tmp_path / INBOX).write_text(
        json.dumps(raw(1, "handled")) + "\n" + json.dumps({"done": [1]}) + "\n"
    )
    journal = opened(tmp_path)
    assert await journal.unanswered(FileRepository(tmp_path)) == []
    assert (tmp_path / INBOX).read_text() == ""


async def test_a_forwarded_message_reads_back(tmp_path: Path) -> None:
    forwarded = raw(1, "look at this")
    forwarded["message"]["forward_origin"] = {
        "type": "user",
        "date": 1_767_225_000,
        "sender_user": {"id": 9, "is_bot": False, "first_name": "Bo"},
    }
    await opened(tmp_path).put([forwarded])
    replay = await opened(tmp_path).unanswered(FileRepository(tmp_path / "chats"))
    assert [r["update_id"] for r in replay] == [1]
    assert Update.model_validate(replay[0]).message.forward_origin is not None  # type: ignore[union-attr]


async def test_replay_looks_back_past_long_tool_turns_and_reads_each_update_once(
    tmp_path: Path,
) -> None:
    repo = FileRepository(tmp_path)
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    for message_id in range(1, 31):  # 30 turns of 8 lines each: 240 lines
        await repo.append(
            ConversationId.telegram(5),
            [
                Message(role="user", content=f"q{message_id}", tg_message_id=message_id),
                *[
                    m
                    for _ in range(3)
                    for m in (
                        Message(role="assistant", content="", tool_calls=(call,)),
                        Message(role="tool", content="r", tool_call_id="c"),
                    )
                ],
                Message(role="assistant", content="a"),
            ],
        )
    records = [raw(101, "q1", message_id=1), raw(131, "q31", message_id=31)]
    records.append(raw(132, "/nocommand but text for the model", message_id=32))
    records.append(records[1])  # the same batch appended twice
    (tmp_path / INBOX).write_text("".join(json.dumps(r) + "\n" for r in records))
    replay = await opened(tmp_path).unanswered(repo)
    assert [r["update_id"] for r in replay] == [131, 132]


async def test_flush_puts_done_marks_on_disk_at_once(tmp_path: Path) -> None:
    journal = opened(tmp_path)
    await journal.put([update(1, "a", chat=5), update(2, "b", chat=6)])
    await journal.done(entry(1))  # 2 is still in flight: the mark would wait for the next batch
    await journal.flush()
    assert on_disk(tmp_path) == [1, 2, ("done", [1])]


async def test_put_hands_every_update_on_and_drops_telegrams_redelivery_of_a_journaled_one(
    tmp_path: Path,
) -> None:
    (tmp_path / INBOX).write_text(json.dumps(raw(7, "from the crashed run")) + "\n")
    journal = opened(tmp_path)
    replayed = await journal.replay(FileRepository(tmp_path / "chats"))
    assert replayed == 1
    # Telegram sends update 7 again (the crashed run never confirmed it), then new ones.
    await journal.put([raw(7, "from the crashed run"), raw(8, "/help"), raw(9, "new")])
    taken = await journal.take(10)
    assert [(e.update_id, e.redelivered) for e in taken] == [(7, False), (8, False), (9, False)]
    assert [e.chat for e in taken] == ["5", "5", "5"]
    # The command is taken but not journaled; the text is.
    assert on_disk(tmp_path) == [7, 9]


async def test_the_done_marks_are_on_disk_before_a_command_runs(tmp_path: Path) -> None:
    journal = opened(tmp_path)
    await journal.put([raw(1, "a", chat=5), raw(2, "b", chat=6), raw(3, "/reset", chat=5)])
    first, second, command = await journal.take(10)
    await journal.done(first)  # 2 is still in flight: the mark would wait for the next batch
    assert not await journal.fence(command)  # the runner asks, in the command's turn
    assert on_disk(tmp_path) == [1, 2, ("done", [1])]
    assert not await journal.fence(second)  # a text message: nothing to write
    assert on_disk(tmp_path) == [1, 2, ("done", [1])]


def media(update_id: int, kind: str, *, album: str | None = None, chat: int = 5) -> dict[str, Any]:
    """A voice, photo or document message (no text), as an update."""
    record = raw(update_id, "", chat)
    message = record["message"]
    del message["text"]
    file = {"file_id": f"f{update_id}", "file_unique_id": f"u{update_id}"}
    if kind == "photo":
        message["photo"] = [{**file, "width": 90, "height": 90}]
    else:
        message[kind] = {**file, "duration": 2} if kind == "voice" else file
    if album is not None:
        message["media_group_id"] = album
    if chat < 0:
        message["chat"] = {"id": chat, "type": "group", "title": "G"}
    return record


async def test_media_is_journaled_and_replayed_an_album_as_one_question(tmp_path: Path) -> None:
    repo = FileRepository(tmp_path / "chats")
    # The first album's turn was stored (its first part's id is the question's): not again.
    await repo.append(
        ConversationId.telegram(5),
        [
            Message(role="user", content="", tg_message_id=3),
            Message(role="assistant", content="ok"),
        ],
    )
    journal = opened(tmp_path)
    await journal.put(
        [
            media(1, "voice"),
            media(2, "document"),
            media(3, "photo", album="a"),
            media(4, "photo", album="a"),
            media(5, "photo", album="b"),
            media(6, "photo", album="b"),
            raw(7, "/reset"),
        ]
    )
    assert on_disk(tmp_path) == [1, 2, 3, 4, 5, 6]
    replay = await opened(tmp_path).unanswered(repo)  # after a crash
    assert [r["update_id"] for r in replay] == [1, 2, 5, 6]


async def test_an_albums_later_parts_in_a_group_are_kept_with_its_first(tmp_path: Path) -> None:
    async def addressed(update: Any) -> bool:  # the first part's caption mentions the bot
        return bool(update["message"].get("caption"))

    journal = Journal(tmp_path, commands=COMMANDS, keep=addressed)
    first = media(1, "photo", album="a", chat=-7)
    first["message"]["caption"] = "@bot what is this?"
    await journal.put([first, media(2, "photo", album="a", chat=-7)])
    await journal.put(
        [media(3, "photo", album="a", chat=-7), media(4, "photo", album="z", chat=-7)]
    )
    assert on_disk(tmp_path) == [1, 2, 3]  # album z was not addressed: no trace


async def test_a_put_cancelled_at_shutdown_leaves_the_close_to_end(tmp_path: Path) -> None:
    # The poller is stopped (cancelled) while its batch is being written: the journal's
    # close must end, not raise the poller's cancellation (the bot's shutdown stops there).
    journal = opened(tmp_path)
    put = asyncio.create_task(journal.put([update(1, "one")]))
    await asyncio.sleep(0)  # the put is in its first await: the write in the worker
    put.cancel()
    with pytest.raises(asyncio.CancelledError):
        await put
    await journal.close()
