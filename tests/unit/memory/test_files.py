"""File-backend specifics: the on-disk format, crash tolerance, and tail reads that stay cheap."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from pathlib import Path

import pytest

from membot.ids import ConversationId
from membot.memory import ConversationState, FileRepository, Message, SessionConfig
from membot.memory.contract.delivery import Delivery, DeliveryMark

SESSION = ConversationId.api("5c3e0f5e-6f1d-4b0a-9a53-2f0c2b1d7e11")


def tg(chat_id: int) -> ConversationId:
    return ConversationId.telegram(chat_id)


async def summarize(repo: FileRepository, cid: ConversationId, text: str, a: int, b: int) -> bool:
    """Save a summary as the summarizer does: in the generation it read."""
    generation = (await repo.get_meta(cid)).generation
    return await repo.save_summary(cid, text, a, b, generation)


def user(text: str) -> Message:
    return Message(role="user", content=text, user_id=1, name="Ann", tg_message_id=10)


async def test_messages_txt_is_one_line_per_message_for_splitlines(tmp_path: Path) -> None:
    """Every character str.splitlines() ends a line at is escaped in messages.txt (and
    summaries.log): a reader of the file as lines sees one line per message, and the text
    reads back unchanged."""
    text = "a\u2028b\u2029c\x85d\x0be\x0cf\x1cg\x1dh\x1ei\r\nj"
    repo = FileRepository(tmp_path)
    await repo.append(tg(42), [user(text), Message(role="assistant", content=text)])
    await summarize(repo, tg(42), text, 1, 2)
    lines = (tmp_path / "42" / "messages.txt").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["content"] for line in lines] == [text, text]
    [logged] = (tmp_path / "42" / "summaries.log").read_text(encoding="utf-8").splitlines()
    assert json.loads(logged)["text"] == text
    assert [m.content for m in await repo.tail(tg(42), 5)] == [text, text]


async def test_layout_on_disk(tmp_path: Path) -> None:
    repo = FileRepository(tmp_path)
    await repo.append(tg(42), [user("hello"), Message(role="assistant", content="hi!")])
    await summarize(repo, tg(42), "they said hello", 1, 2)
    chat = tmp_path / "42"
    lines = (chat / "messages.txt").read_text().splitlines()
    first = json.loads(lines[0])
    assert first["role"] == "user" and first["content"] == "hello"
    assert first["user_id"] == 1 and first["name"] == "Ann" and first["tg_message_id"] == 10
    assert first["ts"].endswith("Z") and first["seq"] == 1
    assert (chat / "summary.txt").read_text() == "they said hello"
    log = json.loads((chat / "summaries.log").read_text().splitlines()[-1])
    assert (log["covers_from"], log["covers_to"], log["text"]) == (1, 2, "they said hello")
    meta = json.loads((chat / "meta.json").read_text())
    assert meta["messages_total"] == 2 and meta["summarized_upto"] == 2
    assert meta["created_at"] and meta["last_summary_at"]
    assert meta["conversation"] == "tg:42" and meta["generation"]
    assert meta["state"]["mode"] == "chat"
    assert not [p for p in chat.iterdir() if p.name.endswith(".tmp")]


async def test_an_api_session_lives_in_its_own_directory_with_its_state_on_the_turn(
    tmp_path: Path,
) -> None:
    repo = FileRepository(tmp_path)
    state = ConversationState(
        mode="consultation",
        round=1,
        max_rounds=3,
        initial_request="plan a trip",
        session=SessionConfig(model="test/other", output_format="json"),
    )
    await repo.append(SESSION, [user("plan a trip"), Message(role="assistant", content="?")])
    await repo.append(SESSION, [user("again"), Message(role="assistant", content="??")], state)
    session = tmp_path / "api" / SESSION.key
    assert sorted(p.name for p in tmp_path.iterdir()) == ["api"]
    lines = [json.loads(line) for line in (session / "messages.txt").read_text().splitlines()]
    # The state rides on the turn's last line only, so the turn and its state are one write.
    assert ["state" in line for line in lines] == [False, False, False, True]
    assert ConversationState.from_dict(lines[-1]["state"]) == state
    meta = json.loads((session / "meta.json").read_text())
    assert meta["conversation"] == str(SESSION)
    assert ConversationState.from_dict(meta["state"]) == state
    assert await repo.conversations("api") == [SESSION]
    assert await repo.conversations("tg") == []


async def test_torn_last_line_is_skipped_and_then_terminated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = FileRepository(tmp_path)
    await repo.append(tg(1), [user("q1"), Message(role="assistant", content="a1")])
    path = tmp_path / "1" / "messages.txt"
    with open(path, "ab") as fh:  # what a kill -9 in the middle of a write leaves
        fh.write(b'{"seq":3,"ts":"2026-01-01T00:00:00.000Z","role":"user","cont')
    with caplog.at_level(logging.WARNING):
        assert [m.content for m in await repo.tail(tg(1), 10)] == ["q1", "a1"]
    assert "torn last line" in caplog.text
    stored = await repo.append(tg(1), [user("q2")])
    assert stored[0].seq == 3
    assert [m.content for m in await repo.tail(tg(1), 10)] == ["q1", "a1", "q2"]
    assert (await repo.get_meta(tg(1))).messages_total == 3


async def test_corrupt_lines_are_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = FileRepository(tmp_path)
    await repo.append(tg(1), [user("good 1")])
    path = tmp_path / "1" / "messages.txt"
    with open(path, "ab") as fh:
        fh.write(b"not json at all\n")
        fh.write(b'{"seq":2,"role":"wizard","content":"x","ts":"2026-01-01T00:00:00Z"}\n')
        fh.write(b"\xff\xfe garbage bytes\n")
    await repo.append(tg(1), [user("good 2")])
    with caplog.at_level(logging.WARNING):
        msgs = await repo.tail(tg(1), 2)
        everything = [m.content async for m in repo.iter_messages(tg(1))]
    assert [m.content for m in msgs] == ["good 1", "good 2"]
    assert everything == ["good 1", "good 2"]
    assert caplog.text.count("corrupt line") >= 3


async def test_corrupt_meta_is_rebuilt_from_the_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = FileRepository(tmp_path)
    for i in range(3):
        await repo.append(tg(1), [user(f"q{i}")])
    await summarize(repo, tg(1), "s", 1, 2)
    (tmp_path / "1" / "meta.json").write_text("{ this is not json")
    with caplog.at_level(logging.WARNING):
        meta = await repo.get_meta(tg(1))
    assert (meta.messages_total, meta.summarized_upto) == (3, 2)
    assert "meta.json" in caplog.text


async def test_stale_meta_after_a_crash_is_reconciled(tmp_path: Path) -> None:
    repo = FileRepository(tmp_path)
    await repo.append(tg(1), [user("q1")])
    meta_path = tmp_path / "1" / "meta.json"
    stale = meta_path.read_text()
    await repo.append(tg(1), [user("q2"), user("q3")])
    meta_path.write_text(stale)  # as if the process died between the append and the meta write
    assert (await repo.get_meta(tg(1))).messages_total == 3


async def test_a_time_written_without_a_zone_reads_as_utc(tmp_path: Path) -> None:
    """A hand-edited or imported archive line with a naive time: the chat still reads (times
    are compared with meta's), and the time is taken as UTC, as membot writes them."""
    await FileRepository(tmp_path).append(tg(1), [user("q1")])
    archive = tmp_path / "1" / "messages.txt"
    record = json.loads(archive.read_text())
    record.update(seq=2, content="q2", ts="2099-01-01T10:00:00")
    with archive.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    context = await FileRepository(tmp_path).context(tg(1), 20)
    assert [m.content for m in context.history] == ["q1", "q2"]
    assert context.meta.updated_at is not None
    assert context.meta.updated_at.isoformat() == "2099-01-01T10:00:00+00:00"


async def test_tail_reads_only_the_end_of_a_large_archive(tmp_path: Path) -> None:
    repo = FileRepository(tmp_path)
    path = tmp_path / "1" / "messages.txt"
    path.parent.mkdir(parents=True)
    # 100,000 messages written directly: the contents are not what is under test.
    with open(path, "w") as fh:
        for i in range(1, 100_001):
            fh.write(Message(role="user", content=f"message {i} " + "x" * 80, seq=i).to_json())
            fh.write("\n")
    messages = await repo.tail(tg(1), 20)
    assert [m.seq for m in messages] == list(range(99_981, 100_001))
    stored = await repo.append(tg(1), [user("next")])
    assert stored[0].seq == 100_001


async def test_reading_on_from_a_seq_in_a_large_archive_starts_exactly_there(
    tmp_path: Path,
) -> None:
    # What a summary reads (the messages after the last summarized one) is found by bisecting
    # byte offsets: every start, beside lines that cannot be read and lines longer than the
    # stretch scanned line by line, must give exactly the messages after it.
    repo = FileRepository(tmp_path)
    path = tmp_path / "1" / "messages.txt"
    path.parent.mkdir(parents=True)
    with open(path, "w") as fh:
        for i in range(1, 3_001):
            size = 20_000 if i % 500 == 7 else 60
            fh.write(Message(role="user", content=f"m{i} " + "x" * size, seq=i).to_json())
            fh.write("\n")
            if i % 250 == 0:
                fh.write("not json at all\n")
                fh.write('{"role":"user","content":"no seq"}\n')
    for after in (0, 1, 6, 7, 8, 249, 250, 251, 1_507, 2_000, 2_999, 3_000, 5_000):
        read = [m.seq async for m in repo.iter_messages(tg(1), after_seq=after)]
        assert read == list(range(after + 1, 3_001)), after


async def test_reading_on_from_a_seq_with_the_context_in_memory_reads_what_is_on_disk(
    tmp_path: Path,
) -> None:
    # A summary reads the messages after the last summarized one from the context the backend
    # keeps when it holds them: they must be the archive's, after appends, a skipped
    # unreadable line and starts older than what is kept, as a restarted bot reads them.
    repo = FileRepository(tmp_path)
    cid = tg(1)
    await repo.append(cid, [user(f"m{i}") for i in range(1, 81)])
    path = tmp_path / "1" / "messages.txt"
    with open(path, "ab") as fh:
        fh.write(b"not json at all\n")
    await repo.append(cid, [user("after the bad line")])
    await repo.context(cid, 64)  # kept in memory from here
    await repo.append(cid, [user("m82"), Message(role="assistant", content="a82")])
    for after in (0, 10, 18, 19, 20, 40, 80, 81, 82, 83, 90):
        kept = [(m.seq, m.content) async for m in repo.iter_messages(cid, after_seq=after)]
        fresh = FileRepository(tmp_path)
        on_disk = [(m.seq, m.content) async for m in fresh.iter_messages(cid, after_seq=after)]
        assert kept == on_disk, after
        assert [seq for seq, _ in kept] == list(range(after + 1, 84)), after


async def test_an_infinite_number_or_too_deep_json_is_a_corrupt_line_not_an_error(
    tmp_path: Path,
) -> None:
    # JSON that parses to an infinite number (1e400) or nests past Python's recursion limit
    # is one damaged line like any other: skipped, not an error that makes the chat
    # unreadable (every turn, every summary, a seek by seq probing it).
    repo = FileRepository(tmp_path)
    cid = tg(1)
    await repo.append(cid, [user(f"m{i}") for i in range(1, 4)])
    good = (tmp_path / "1" / "messages.txt").read_text().splitlines()
    damaged = [
        good[0].replace('"seq":1,', '"seq":1e400,'),
        good[0].replace('"user_id":1,', '"user_id":-1e999,'),
        good[0][:-1] + ',"x":' + "[" * 100_000 + "]" * 100_000 + "}",
    ]
    lines = [good[0], *damaged, good[1]]
    filler = [Message(role="user", content="x" * 100, seq=i).to_json() for i in range(3, 200)]
    (tmp_path / "1" / "messages.txt").write_text("\n".join(lines + filler) + "\n")
    context = await FileRepository(tmp_path).context(cid, 500)
    assert [m.seq for m in context.history] == list(range(1, 200))
    for after in (0, 1, 2, 150):
        read = [m.seq async for m in FileRepository(tmp_path).iter_messages(cid, after)]
        assert read == list(range(after + 1, 200)), after


async def test_long_lines_spanning_read_blocks(tmp_path: Path) -> None:
    repo = FileRepository(tmp_path)
    big = "y" * 200_000
    await repo.append(tg(1), [user("before"), user(big), user("after")])
    assert [len(m.content) for m in await repo.tail(tg(1), 3)] == [6, 200_000, 5]


async def test_append_after_long_and_torn_long_last_lines(tmp_path: Path) -> None:
    # The last seq is found by reading backwards in growing blocks: lines longer than the
    # first block, whole or torn, must not lose or repeat a seq.
    repo = FileRepository(tmp_path)
    await repo.append(tg(1), [user("short"), user("z" * 50_000)])
    assert [m.seq for m in await repo.append(tg(1), [user("next")])] == [3]
    path = tmp_path / "1" / "messages.txt"
    with open(path, "ab") as fh:  # a long line torn by a crash
        fh.write(b'{"seq":4,"ts":"2026-01-01T00:00:00.000Z","role":"user","content":"')
        fh.write(b"w" * 9000)
    assert [m.seq for m in await repo.append(tg(1), [user("after the crash")])] == [4]
    assert [m.content[:5] for m in await repo.tail(tg(1), 10)] == [
        "short",
        "zzzzz",
        "next",
        "after",
    ]


async def test_a_damaged_summary_costs_a_character_not_the_turn(tmp_path: Path) -> None:
    repo = FileRepository(tmp_path)
    await repo.append(tg(7), [user("hi")])
    (tmp_path / "7" / "summary.txt").write_bytes(b"Ann likes \xff tea")
    context = await repo.context(tg(7), 20)
    assert context.summary == "Ann likes \ufffd tea"
    assert [m.content for m in context.history] == ["hi"]


async def test_a_reset_never_runs_beside_a_cancelled_summary_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # /reset cancels a summary that may be inside its worker thread. The thread cannot be
    # stopped; if the reset ran beside it, the old summary could be written back afterwards.
    repo = FileRepository(tmp_path)
    await repo.append(tg(1), [user("q"), Message(role="assistant", content="a")])
    generation = (await repo.get_meta(tg(1))).generation
    inside, release = threading.Event(), threading.Event()
    real_pread = os.pread

    def slow_disk(fd: int, length: int, offset: int) -> bytes:
        inside.set()
        release.wait(10)
        return real_pread(fd, length, offset)

    monkeypatch.setattr(os, "pread", slow_disk)  # the summary's first read stalls on "disk"
    saving = asyncio.create_task(repo.save_summary(tg(1), "OLD SUMMARY", 1, 2, generation))
    await asyncio.to_thread(inside.wait, 10)
    saving.cancel()
    resetting = asyncio.create_task(repo.reset(tg(1)))
    # The reset must wait for the stalled write (it is quick: give it every chance to jump in).
    done, _ = await asyncio.wait({resetting}, timeout=0.5)
    assert not done
    release.set()
    await resetting
    with pytest.raises(asyncio.CancelledError):
        await saving
    monkeypatch.undo()
    assert await repo.get_summary(tg(1)) == ""
    assert await repo.tail(tg(1), 10) == []
    assert not (tmp_path / "1").exists()


@pytest.mark.parametrize(
    ("meta_json", "facts_json"),
    [
        ('{"chat_id": 3, "created_at": 5}', '{"facts": ["not an object"]}'),
        ("[]", '"just a string"'),
    ],
    ids=["wrong-field-types", "wrong-top-level-types"],
)
async def test_well_formed_json_of_the_wrong_shape_is_read_around(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, meta_json: str, facts_json: str
) -> None:
    repo = FileRepository(tmp_path)
    await repo.append(tg(3), [user("hi")])
    (tmp_path / "3" / "meta.json").write_text(meta_json)
    (tmp_path / "3" / "facts.json").write_text(facts_json)
    with caplog.at_level(logging.WARNING):
        context = await repo.context(tg(3), 20)
        stored = await repo.append(tg(3), [user("still here")])
    assert [m.content for m in context.history] == ["hi"] and context.facts == []
    assert context.meta.messages_total == 1 and stored[0].seq == 2
    assert "unreadable" in caplog.text


async def test_a_reset_also_deletes_what_an_interrupted_reset_left(tmp_path: Path) -> None:
    repo = FileRepository(tmp_path)
    leftover = tmp_path / ".deleted-5-0123abcd"  # a crash stopped that reset mid-delete
    leftover.mkdir()
    (leftover / "messages.txt").write_text('{"secret": "forgotten"}\n')
    await repo.append(tg(6), [user("hi")])
    await repo.reset(tg(6))
    assert sorted(p.name for p in tmp_path.iterdir()) == []


async def test_a_summary_after_a_torn_summaries_log_entry_is_kept_whole(tmp_path: Path) -> None:
    repo = FileRepository(tmp_path)
    await repo.append(tg(8), [user("q"), Message(role="assistant", content="a")])
    await summarize(repo, tg(8), "first", 1, 2)
    with open(tmp_path / "8" / "summaries.log", "ab") as fh:
        fh.write(b'{"ts": "2026-01-01T00:00:00.000Z", "covers_fr')  # torn by a crash
    await repo.append(tg(8), [user("q2"), Message(role="assistant", content="a2")])
    await summarize(repo, tg(8), "second", 3, 4)
    lines = (tmp_path / "8" / "summaries.log").read_bytes().split(b"\n")
    last = json.loads(lines[-2])
    assert (last["text"], last["covers_from"], last["covers_to"]) == ("second", 3, 4)


def test_a_directory_comes_only_from_a_conversation_id(tmp_path: Path) -> None:
    repo = FileRepository(tmp_path)
    # Telegram chats keep the layout they always had; API sessions get a directory of their own.
    assert repo.conversation_dir(tg(-100123)) == tmp_path / "-100123"
    assert repo.conversation_dir(SESSION) == tmp_path / "api" / SESSION.key
    assert repo.conversation_dir(ConversationId.parse("42")) == tmp_path / "42"
    with pytest.raises((AttributeError, TypeError)):
        repo.conversation_dir("../../etc")  # type: ignore[arg-type]


async def test_a_corrupt_facts_file_is_kept_aside_not_overwritten(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = FileRepository(tmp_path)
    chat = tmp_path / "42"
    chat.mkdir()
    (chat / "facts.json").write_text('{"facts": [{"text": "likes te')  # torn by hand
    with caplog.at_level(logging.WARNING):
        assert await repo.get_facts(tg(42)) == []
        assert await repo.add_fact(tg(42), "Name is Ann", 10)
    assert await repo.get_facts(tg(42)) == ["Name is Ann"]
    [aside] = chat.glob("facts.json.corrupt-*")
    assert aside.read_text() == '{"facts": [{"text": "likes te'
    assert "unreadable" in caplog.text


async def test_a_chat_from_before_generations_still_gets_its_summaries(tmp_path: Path) -> None:
    # meta.json as version 1 wrote it: chat_id and settings, no generation, no state.
    chat = tmp_path / "42"
    chat.mkdir()
    with open(chat / "messages.txt", "w") as fh:
        for i, role in enumerate(["user", "assistant"], 1):
            fh.write(Message(role=role, content=f"m{i}", seq=i).to_json() + "\n")  # type: ignore[arg-type]
    (chat / "meta.json").write_text(
        json.dumps(
            {
                "chat_id": 42,
                "messages_total": 2,
                "summarized_upto": 0,
                "summaries_made": 0,
                "created_at": "2025-01-01T10:00:00.000Z",
                "updated_at": "2025-01-01T10:00:05.000Z",
                "last_summary_at": None,
                "settings": {},
                "version": 1,
            }
        )
    )
    repo = FileRepository(tmp_path)
    meta = await repo.get_meta(tg(42))
    assert (meta.messages_total, meta.state) == (2, ConversationState())
    assert await summarize(repo, tg(42), "an old chat's summary", 1, 2) is True
    assert await repo.get_summary(tg(42)) == "an old chat's summary"
    await repo.append(tg(42), [user("still here")])
    assert (await repo.get_meta(tg(42))).generation == meta.generation


async def test_a_turn_stored_when_meta_cannot_be_written_is_not_reported_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The archive line is durable once written: failing the append afterwards would make
    # the caller send the round again, and count it twice.
    repo = FileRepository(tmp_path)
    cid = ConversationId.api("5d0f3c1e-8a7b-4c2d-9e1f-0a1b2c3d4e5f")
    consulting = ConversationState(mode="consultation", round=1, max_rounds=3)
    await repo.append(cid, [user("q1"), Message(role="assistant", content="a1")], consulting)
    meta_path = tmp_path / "api" / cid.key / "meta.json"
    meta_path.unlink()
    meta_path.mkdir()  # any replace of meta.json now fails with an OSError
    second = ConversationState(mode="consultation", round=2, max_rounds=3)
    with caplog.at_level(logging.WARNING):
        stored = await repo.append(
            cid, [user("q2"), Message(role="assistant", content="a2")], second
        )
    assert [m.seq for m in stored] == [3, 4]
    assert "meta.json not updated" in caplog.text
    meta = await repo.get_meta(cid)
    assert (meta.messages_total, meta.state.round) == (4, 2)


async def test_the_context_kept_in_memory_is_what_a_restarted_bot_reads(tmp_path: Path) -> None:
    # The backend keeps recent contexts in memory (memory/files/hot.py) and its writes keep them
    # true: after every kind of write, the next turn must see exactly what a bot started
    # afresh on the same directory would read from disk.
    repo = FileRepository(tmp_path)
    cid = tg(77)
    consulting = ConversationState(mode="consultation", round=1, max_rounds=3)

    async def same_as_on_disk(limit: int = 4) -> None:
        kept = await repo.context(cid, limit)
        read = await FileRepository(tmp_path).context(cid, limit)
        assert [(m.seq, m.content) for m in kept.history] == [
            (m.seq, m.content) for m in read.history
        ]
        if read.meta.created_at is None:  # nothing on disk: each read names a new generation
            read.meta.generation = kept.meta.generation
        assert (kept.summary, kept.facts, kept.meta) == (read.summary, read.facts, read.meta)

    async def turn(n: int, state: ConversationState | None = None) -> None:
        await repo.append(cid, [user(f"q{n}"), Message(role="assistant", content=f"a{n}")], state)

    await same_as_on_disk()  # nothing yet
    await turn(1)  # the first turn writes meta.json
    await same_as_on_disk()
    for n in range(2, 5):  # past the window of 4: the oldest fall out
        await turn(n)
        await same_as_on_disk()
    await turn(5, consulting)  # a state change, and the turn after it
    await same_as_on_disk()
    await turn(6)
    await same_as_on_disk()
    assert await summarize(repo, cid, "they talked", 1, 8)
    await same_as_on_disk()
    # meta.json rewritten by a turn from the meta the summary left in memory.
    await turn(61, consulting)
    await same_as_on_disk()
    await turn(62)
    await same_as_on_disk()
    await repo.add_fact(cid, "likes tea", 10)
    await same_as_on_disk()
    await repo.set_state(cid, ConversationState())
    await same_as_on_disk()
    await turn(7)
    await same_as_on_disk(limit=20)  # a deeper window than the one kept: read again
    # meta.json rewritten by a turn from the meta kept in memory, not read again.
    await turn(71, consulting)
    await same_as_on_disk()
    await turn(72)
    await same_as_on_disk()
    await repo.reset(cid)
    await same_as_on_disk()
    await turn(8)
    await same_as_on_disk()


async def test_only_the_most_recent_contexts_are_kept(tmp_path: Path) -> None:
    from membot.memory.files.hot import CAPACITY

    repo = FileRepository(tmp_path)
    for chat in range(1, CAPACITY + 10):
        await repo.append(tg(chat), [user(f"hello from {chat}")])
        await repo.context(tg(chat), 20)
    # The first chats were let go (memory stays bounded); they are read again from disk.
    assert (await repo.context(tg(1), 20)).history[0].content == "hello from 1"
    assert (await repo.context(tg(CAPACITY + 9), 20)).meta.messages_total == 1


# -- the delivery record: one per conversation, rewritten in place --------------------------


def to_send(text: str) -> Message:
    return Message(role="assistant", content=text, delivery=Delivery())


async def test_answers_reuse_one_delivery_record_written_in_place(tmp_path: Path) -> None:
    """The first answer creates the chat's record; later answers and their deliveries
    rewrite that same file in place (same inode, same size), never a new file per answer."""
    repo = FileRepository(tmp_path)
    record = tmp_path / "42" / "undelivered.json"
    await repo.append(tg(42), [user("q1"), to_send("a1")])
    first = os.stat(record)
    await repo.mark_delivered(tg(42), 2, 0, sending=True)
    await repo.mark_delivered(tg(42), 2)
    for n in (3, 5):
        await repo.append(tg(42), [user("q"), to_send("a")])
        assert await repo.delivery_mark(tg(42)) == DeliveryMark(after=n - 1)
        await repo.mark_delivered(tg(42), n + 1, 0, sending=True)
        await repo.mark_delivered(tg(42), n + 1)
        assert await repo.delivery_mark(tg(42)) is None
    now = os.stat(record)
    assert (now.st_ino, now.st_size) == (first.st_ino, first.st_size)
    assert await repo.undelivered("tg") == []


async def test_the_delivery_kept_in_memory_is_what_a_restarted_bot_reads(tmp_path: Path) -> None:
    """The backend keeps each chat's delivery record, and the archive's end after its own
    append, in memory (memory/files/delivery.py KnownRecords): an append does not read the
    record again, nor a delivery the archive's tail. After every step, the mark is what a bot
    started afresh on the same directory reads from disk."""
    repo = FileRepository(tmp_path)
    cid = tg(42)

    async def same_as_on_disk() -> DeliveryMark | None:
        kept = await repo.delivery_mark(cid)
        fresh = FileRepository(tmp_path)
        assert kept == await fresh.delivery_mark(cid)
        assert await repo.undelivered("tg") == await fresh.undelivered("tg")
        return kept

    await repo.append(cid, [user("q1"), to_send("a1")])
    assert await same_as_on_disk() == DeliveryMark(after=0)
    await repo.mark_delivered(cid, 2, 0, sending=True)
    assert await same_as_on_disk() == DeliveryMark(after=0, seq=2, parts=0, sending=True)
    await repo.mark_delivered(cid, 2)
    assert await same_as_on_disk() is None
    await repo.append(cid, [user("a question alone")])  # no answer: nothing pending
    assert await same_as_on_disk() is None
    await repo.append(cid, [user("q4"), to_send("a4")])
    await repo.append(cid, [user("q6"), to_send("a6")])  # a4 not sent yet: both pending
    assert await same_as_on_disk() == DeliveryMark(after=3)
    await repo.mark_delivered(cid, 5)
    assert await same_as_on_disk() == DeliveryMark(after=5)
    # The archive rewritten by a forget after the append: the delivery reads its end again.
    await repo.forget(cid, [4])
    await repo.mark_delivered(cid, 7)
    assert await same_as_on_disk() is None
    await repo.append(cid, [user("q8"), to_send("a8")])
    await repo.mark_delivered(cid, 9)
    assert await same_as_on_disk() is None
    await repo.append(cid, [user("q10"), to_send("a10")])  # only the new answer is pending
    assert await same_as_on_disk() == DeliveryMark(after=9)


async def test_a_mark_left_by_an_earlier_version_is_still_sent(tmp_path: Path) -> None:
    """An earlier version's mark (`{"after": 2}`, there only while answers were unsent)
    still names the answers to send after an upgrade, and clears once they are."""
    repo = FileRepository(tmp_path)
    await repo.append(tg(42), [user("q1"), Message(role="assistant", content="a1")])
    await repo.append(tg(42), [user("q2"), Message(role="assistant", content="a2")])
    (tmp_path / "42" / "undelivered.json").write_text('{"after":2}')
    repo = FileRepository(tmp_path)
    assert await repo.undelivered("tg") == [tg(42)]
    assert await repo.delivery_mark(tg(42)) == DeliveryMark(after=2)
    await repo.mark_delivered(tg(42), 4)
    assert await repo.delivery_mark(tg(42)) is None
    await repo.append(tg(42), [user("q3"), to_send("a3")])
    assert await repo.delivery_mark(tg(42)) == DeliveryMark(after=4)


async def test_an_unreadable_delivery_record_is_replaced_by_the_next_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A damaged record sends nothing (its answers are unknown: logged), and the next
    answer's append writes a new one, so that answer is not lost. Found at start-up: a
    running backend is its files' only writer and reads no record it wrote again."""
    await FileRepository(tmp_path).append(tg(42), [user("q1"), to_send("a1")])
    (tmp_path / "42" / "undelivered.json").write_bytes(b"\x00garbage")
    repo = FileRepository(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert await repo.undelivered("tg") == []
    assert "unreadable undelivered.json" in caplog.text
    await repo.append(tg(42), [user("q2"), to_send("a2")])
    assert await repo.delivery_mark(tg(42)) == DeliveryMark(after=2)


async def _unsent_after_forgets(root: Path, pad: int) -> tuple[int, int, int, int]:
    """A delivered turn whose question is `pad` characters longer, an answer not yet sent,
    then that question forgotten again and again (the archive rewritten into a new file each
    time) until the archive has its first inode back, or eight times: the archive's inode
    and size when the record was written, and at the end."""
    repo = FileRepository(root)
    await repo.append(tg(42), [user("secret " + "x" * pad), to_send("a1")])
    await repo.mark_delivered(tg(42), 2)
    path = root / "42" / "messages.txt"
    marked = os.stat(path)
    await repo.append(tg(42), [user("q2"), to_send("a2")])
    for _ in range(8):
        await repo.forget(tg(42), [1])
        now = os.stat(path)
        if now.st_ino == marked.st_ino:
            break
    return marked.st_ino, marked.st_size, now.st_ino, now.st_size


async def test_an_unsent_answer_stays_pending_when_a_forget_reuses_the_archives_inode(
    tmp_path: Path,
) -> None:
    """A forget's rewrite frees the archive's inode and a later one's new file may get it
    back (ext4 does); should that file also have the size the delivery record holds, the
    unsent answer must still be sent, after a restart too."""
    _, first, _, final = await _unsent_after_forgets(tmp_path / "measure", 0)
    pad = final - first  # a question this much longer: the record's size is the final one
    for attempt in range(10):
        root = tmp_path / str(attempt)
        ino, size, now_ino, now_size = await _unsent_after_forgets(root, pad)
        if (ino, size) != (now_ino, now_size):
            continue  # the inode was not reused this time (other files were made meanwhile)
        assert await FileRepository(root).undelivered("tg") == [tg(42)]
        assert await FileRepository(root).delivery_mark(tg(42)) == DeliveryMark(after=2)
        return
    pytest.skip("this file system did not give the freed inode back")
