"""The index behind archive search: each message indexed with its neighbours (and kept so as
messages arrive), periods (since/until), and the summaries and facts as entries pointing back
to their messages."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from membot.ids import ConversationId
from membot.memory import FileRepository, Message
from membot.memory.contract.attachment import Attachment
from membot.search import HistorySearch, SearchHit
from membot.search.schema import SCHEMA_VERSION
from membot.search.store import index_summary

CHAT = ConversationId.telegram(42)
OTHER = ConversationId.telegram(43)
T0 = datetime(2025, 1, 6, 18, 0, tzinfo=UTC)


@pytest.fixture
def repo(tmp_path: Path) -> FileRepository:
    return FileRepository(tmp_path)


@pytest.fixture
def search(repo: FileRepository, tmp_path: Path) -> HistorySearch:
    return HistorySearch(repo, tmp_path)


def said(name: str, text: str, day: int = 0, minute: int = 0) -> Message:
    ts = T0 + timedelta(days=day, minutes=minute)
    return Message(role="user", content=text, name=name, user_id=len(name), ts=ts)


def bot(text: str, day: int = 0, minute: int = 0) -> Message:
    return Message(role="assistant", content=text, ts=T0 + timedelta(days=day, minutes=minute))


def remember(fact: str, call_id: str, day: int = 0, result: str = "") -> list[Message]:
    """A turn's tool use as the agent stores it: the call, then the tool's result."""
    arguments = json.dumps({"fact": fact})
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "remember", "arguments": arguments},
    }
    ts = T0 + timedelta(days=day, minutes=1)
    return [
        Message(role="assistant", content="", tool_calls=(call,), ts=ts),
        Message(role="tool", content=result or f"Remembered: {fact}", tool_call_id=call_id, ts=ts),
    ]


def small_talk(count: int, day: int = 0) -> list[Message]:
    topics = ["weather", "coffee", "movies", "work", "traffic", "lunch"]
    return [
        said("Boris", f"chat {i} about the {topics[i % len(topics)]}", day, i) for i in range(count)
    ]


LEASE_FILE = "0123456789abcdef0123456789abcdef.txt"
LEASE = Attachment(kind="document", file=LEASE_FILE, name="lease.txt")


def conversation() -> list[Message]:
    return [
        said("Anna", "How was the concert yesterday?"),
        said("Boris", "Amazing, they played the whole first album"),
        bot("", minute=1),  # blank: not indexed, and nobody's neighbour
        said("Carla", "I started painting again, watercolours this time", minute=2),
        *remember("Carla paints in watercolours", "c1"),
        bot("Noted, good luck with the painting!", minute=3),
        *small_talk(12, day=1),
        said("Anna", "the deposit for the flat is due on Friday", day=2),
        *remember("The flat's deposit is due on Friday", "c2", day=2),
        said("Boris", "I will transfer my half tonight", day=2, minute=5),
        # A document's pieces are rows of their own, nobody's neighbours.
        Message(role="user", content="the lease", name="Anna", attachments=(LEASE,), ts=T0),
        said("Carla", "thanks, reading it", day=2, minute=9),
    ]


def dump(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """Everything the index holds: every term instance (term, row, column, offset) of the
    full-text index, and the rows shown for hits."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, 'terms', 'instance')")
        terms = conn.execute("SELECT * FROM temp.v ORDER BY 1, 2, 3, 4").fetchall()
        rows = conn.execute("SELECT * FROM messages ORDER BY id").fetchall()
        return terms, rows
    finally:
        conn.close()


async def test_one_message_at_a_time_indexes_exactly_what_one_batch_does(
    repo: FileRepository, search: HistorySearch
) -> None:
    messages = conversation()
    for cid in (CHAT, OTHER):
        await repo.put_file(cid, LEASE_FILE, b"The deposit is two months of rent.")
    await repo.append(CHAT, messages)
    await search.search(CHAT, "concert")
    for message in messages:
        await repo.append(OTHER, [message])
        # Each search catches up with the one new message: its row, and its predecessors'.
        await search.search(OTHER, "concert")
    batch, single = dump(search.index_path(CHAT)), dump(search.index_path(OTHER))
    assert single == batch
    assert len(batch[0]) > 100
    # The same scores too: BM25 also reads the rows' lengths and the average.
    for query in ("concert album", "painting watercolours", "deposit Friday", "Boris half"):
        hits = [await search.search(cid, query, 10) for cid in (CHAT, OTHER)]
        assert [(h.seq, h.kind, h.score) for h in hits[0]] == [
            (h.seq, h.kind, h.score) for h in hits[1]
        ]
    kinds = {hit.kind for hit in await search.search(OTHER, "deposit flat months rent", 10)}
    assert kinds == {"message", "document", "fact"}


async def test_two_processes_catching_up_at_once_index_what_one_would(
    repo: FileRepository, tmp_path: Path
) -> None:
    """The bot and an operator's `membot search` index the same file, each under its own
    lock: each catch-up reads how far the index got, and the rows its new messages change
    (the predecessor's), inside its write transaction, so neither writes a row twice."""
    bot_side, operator = HistorySearch(repo, tmp_path), HistorySearch(repo, tmp_path)
    messages = conversation()
    for cid in (CHAT, OTHER):
        await repo.put_file(cid, LEASE_FILE, b"The deposit is two months of rent.")
    await repo.append(CHAT, messages)
    await bot_side.search(CHAT, "concert")
    for start in range(0, len(messages), 3):
        await repo.append(OTHER, messages[start : start + 3])
        await asyncio.gather(*(s.search(OTHER, "concert") for s in (bot_side, operator)))
    assert dump(bot_side.index_path(OTHER)) == dump(bot_side.index_path(CHAT))


async def test_two_processes_building_a_new_index_at_once_both_find(
    repo: FileRepository, tmp_path: Path
) -> None:
    """The first build switches the file to WAL, which needs it to itself: with the other
    process inside its transaction then, SQLite refuses at once, without waiting."""
    sides = (HistorySearch(repo, tmp_path), HistorySearch(repo, tmp_path))
    for n in range(30):
        cid = ConversationId.telegram(1000 + n)
        await repo.append(cid, conversation()[:3])
        found = await asyncio.gather(*(side.search(cid, "concert") for side in sides))
        assert [[hit.seq for hit in hits] for hits in found] == [[1], [1]]
    # Left in the default journal mode then, the file is switched by a later search.
    path = sides[0].index_path(cid)
    assert journal_mode(path, "delete") == "delete"
    await sides[0].search(cid, "concert")
    assert journal_mode(path) == "wal"


def journal_mode(path: Path, new: str | None = None) -> str:
    conn = sqlite3.connect(path)
    try:
        pragma = "PRAGMA journal_mode" + (f" = {new}" if new else "")
        return str(conn.execute(pragma).fetchone()[0])
    finally:
        conn.close()


async def test_the_answer_is_found_by_the_words_of_the_question_before_it(
    repo: FileRepository, search: HistorySearch
) -> None:
    midnight = T0 + timedelta(hours=6)
    question = said("Anna", "How was the concert yesterday?", minute=359)
    await repo.append(CHAT, [*small_talk(10), question])
    [hit] = await search.search(CHAT, "concert", 1)
    assert hit.content == "How was the concert yesterday?"
    # The reply arrives after the question was indexed, past midnight: both rows learn of
    # each other. Searched the day after, the reply is found by the question's words.
    reply = said("Boris", "Amazing, they played the whole first album", day=0, minute=361)
    await repo.append(CHAT, [reply, *small_talk(10, day=1)])
    [hit] = await search.search(CHAT, "concert", 5, since=midnight)
    assert hit.content == "Amazing, they played the whole first album"
    # ... and the question by the reply's words, the day before (its row was rewritten).
    [hit] = await search.search(CHAT, "first album", 5, until=midnight)
    assert hit.content == "How was the concert yesterday?"
    # Both days: the question is the hit, and its reply is not a hit of its own; it is the
    # question's neighbour (excerpts show it with it).
    hits = [h.content for h in await search.search(CHAT, "concert", 5)]
    assert hits == ["How was the concert yesterday?"]


async def test_the_turns_around_a_message_left_out_are_found_by_its_words(
    repo: FileRepository, search: HistorySearch
) -> None:
    await repo.append(
        CHAT,
        [
            *small_talk(6),
            said("Anna", "Which hotel did you book in Lisbon?", day=1),
            said("Boris", "The one near the river, with the blue tiles", day=2),
            *small_talk(6, day=2),
        ],
    )
    # The question is left out by the period: the turns on either side are found by its
    # words, and nothing further.
    hits = await search.search(CHAT, "Lisbon hotel", 20, until=T0 + timedelta(days=1))
    assert [h.content for h in hits] == ["chat 5 about the lunch"]
    hits = await search.search(CHAT, "Lisbon hotel", 20, since=T0 + timedelta(days=2))
    assert [h.content for h in hits] == ["The one near the river, with the blue tiles"]


async def test_a_period_keeps_only_its_messages_ranked_by_relevance(
    repo: FileRepository, search: HistorySearch
) -> None:
    await repo.append(
        CHAT,
        [
            said("Anna", "we booked the hotel in Porto near the old bridge", day=0),
            *small_talk(5, day=1),
            said("Anna", "the hotel was fine", day=30),
            *small_talk(5, day=31),
            said("Anna", "maybe a hotel again next year", day=60),
        ],
    )
    found = await search.search(CHAT, "hotel Porto old bridge", 3)
    # The oldest message matches best, and comes first: relevance, not recency.
    assert found[0].ts == T0
    in_january = await search.search(
        CHAT, "hotel", 10, since=T0 + timedelta(days=1), until=T0 + timedelta(days=31)
    )
    assert [h.content for h in in_january if "hotel" in h.content] == ["the hotel was fine"]
    assert all(T0 + timedelta(days=1) <= h.ts < T0 + timedelta(days=31) for h in in_january)
    # since is inclusive, until exclusive, in any time zone.
    moscow = timezone(timedelta(hours=3))
    at = (T0 + timedelta(days=30)).astimezone(moscow)
    [hit] = await search.search(CHAT, "hotel fine", 1, since=at)
    assert hit.content == "the hotel was fine"
    hits = await search.search(CHAT, "hotel fine", 10, until=at)
    assert "the hotel was fine" not in [h.content for h in hits]
    assert await search.search(CHAT, "hotel", since=T0 + timedelta(days=61)) == []


async def test_a_fact_kept_with_remember_is_an_entry_pointing_at_its_turn(
    repo: FileRepository, search: HistorySearch
) -> None:
    await repo.append(CHAT, conversation())
    hits = await search.search(CHAT, "watercolours", 5)
    facts = [h for h in hits if h.kind == "fact"]
    assert [(h.content, h.covers, h.role) for h in facts] == [
        ("Carla paints in watercolours", (4, 4), "assistant")
    ]
    assert next(h.seq for h in hits if h.kind == "message") == 4
    # A fact is dated by the turn it was kept in, and a period finds it.
    [deposit] = [
        h
        for h in await search.search(CHAT, "deposit due", 10, since=T0 + timedelta(days=2))
        if h.kind == "fact"
    ]
    assert deposit.content == "The flat's deposit is due on Friday"
    assert deposit.ts == T0 + timedelta(days=2, minutes=1)
    assert deposit.covers == (deposit.seq, deposit.seq)
    # A call that failed kept nothing: no entry.
    refused = "Error: 100 facts are already kept; forget some first"
    await repo.append(
        CHAT, [said("Anna", "remember my cat is Murzik", day=3), *remember("cat", "c3", 3, refused)]
    )
    assert {h.kind for h in await search.search(CHAT, "cat Murzik", 10)} == {"message"}
    hits = await search.search(CHAT, "deposit flat", 10)
    assert next(h for h in hits if h.kind == "message").seq == deposit.seq


async def test_a_failed_remember_call_at_the_end_of_a_batch_gives_no_fact(
    repo: FileRepository, search: HistorySearch
) -> None:
    """A long archive is indexed in batches of 2,000 messages: a batch never ends between a
    remember call and its result, which says whether the fact was kept."""
    refused = "Error: 100 facts are already kept; forget some first"
    turn = [
        said("Anna", "remember my cat is Murzik", day=3),
        *remember("cat Murzik", "c9", 3, refused),
    ]
    # The call is the 2,000th message, its result the 2,001st.
    await repo.append(CHAT, [*small_talk(1998), *turn])
    assert {h.kind for h in await search.search(CHAT, "cat Murzik", 10)} == {"message"}


async def test_each_summary_is_an_entry_covering_the_messages_it_added(
    repo: FileRepository, search: HistorySearch, caplog: pytest.LogCaptureFixture
) -> None:
    await repo.append(CHAT, conversation())
    generation = (await repo.get_meta(CHAT)).generation
    first = "Anna asked about a concert; Carla took up watercolour painting."
    assert await repo.save_summary(CHAT, first, 1, 10, generation)
    [hit] = [
        h for h in await search.search(CHAT, "watercolour painting", 10) if h.kind == "summary"
    ]
    assert (hit.content, hit.covers, hit.seq) == (first, (1, 10), 1)
    await repo.append(CHAT, small_talk(10, day=3))
    second = first + " The flat's deposit is due on Friday."
    assert await repo.save_summary(CHAT, second, 11, 24, generation)
    summaries = [
        h for h in await search.search(CHAT, "deposit painting", 10) if h.kind == "summary"
    ]
    assert sorted((h.covers, h.content) for h in summaries) == [
        ((1, 10), first),
        ((11, 24), second),
    ]
    # Another process that saw the same summary does not index it twice.
    index_summary(search.index_path(CHAT), second, 24)
    again = [h for h in await search.search(CHAT, "deposit painting", 10) if h.kind == "summary"]
    assert len(again) == 2
    # The index is a cache: rebuilt, it knows only the current summary, covering all.
    conn = sqlite3.connect(search.index_path(CHAT))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    conn.close()
    caplog.set_level(logging.INFO, logger="membot.search")
    summaries = [
        h for h in await search.search(CHAT, "deposit painting", 10) if h.kind == "summary"
    ]
    assert [(h.covers, h.content) for h in summaries] == [((1, 24), second)]
    assert "building the search index" in caplog.text


async def test_an_index_of_an_older_schema_is_rebuilt(
    repo: FileRepository, search: HistorySearch
) -> None:
    await repo.append(CHAT, conversation())
    path = search.index_path(CHAT)
    path.parent.mkdir(parents=True, exist_ok=True)
    # What version 3 wrote: no neighbour columns, no entries.
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE state (id INTEGER PRIMARY KEY, generation TEXT, last_seq INTEGER);
        CREATE TABLE messages (id INTEGER PRIMARY KEY, seq INTEGER, ts TEXT, role TEXT,
            name TEXT, content TEXT);
        CREATE VIRTUAL TABLE terms USING fts5(stems, prefixes, sender, content='');
        PRAGMA user_version = 3;
        """
    )
    generation = (await repo.get_meta(CHAT)).generation
    conn.execute("INSERT INTO state VALUES (1, ?, 20)", (generation,))
    conn.commit()
    conn.close()
    hits = await search.search(CHAT, "concert", 2)
    assert [h.content for h in hits] == ["How was the concert yesterday?"]
    assert isinstance(hits[0], SearchHit) and hits[0].kind == "message"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


async def test_a_documents_pieces_stand_alone(repo: FileRepository, tmp_path: Path) -> None:
    search = HistorySearch(repo, tmp_path, chunker=lambda text: text.split("\n\n"))
    await repo.put_file(
        CHAT,
        "0123456789abcdef0123456789abcdef.txt",
        b"The cat is Murzik.\n\nThe deposit is 500 euros.",
    )
    letter = Attachment(
        kind="document", file="0123456789abcdef0123456789abcdef.txt", name="lease.txt"
    )
    await repo.append(
        CHAT,
        [
            said("Anna", "Here is the lease for the new flat"),
            Message(role="user", content="see attached", name="Anna", attachments=(letter,)),
            said("Boris", "Thanks, I will read it tonight"),
            *small_talk(4),
        ],
    )
    hits = await search.search(CHAT, "Murzik", 10)
    # The piece is shown as its message's, and the messages around it are not found by it.
    assert [(h.kind, h.seq, h.content) for h in hits] == [
        ("document", 2, "[lease.txt] The cat is Murzik.")
    ]
    hits = await search.search(CHAT, "new flat tonight", 10)
    assert {h.seq for h in hits if h.kind == "document"} == set()
    assert {h.kind for h in hits} == {"message"}
