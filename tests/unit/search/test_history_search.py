"""Archive search: what the model (search_history) and operators get back from a chat's past."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from membot.ids import ConversationId
from membot.memory import FileRepository, Message
from membot.search import HistorySearch, SearchHit
from tests.fakes.search_corpus import FACTS, generate_conversation, recall_at_k

CHAT = ConversationId.telegram(42)
SESSION = ConversationId.api("7d444840-9dc0-11d1-b245-5ffdce74fad2")
INDEX_LOGGER = "membot.search"  # the index (index.py) and its file (store.py)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def repo(data_dir: Path) -> FileRepository:
    return FileRepository(data_dir)


@pytest.fixture
def search(repo: FileRepository, data_dir: Path) -> HistorySearch:
    # As the bot wires it: the index sits next to messages.txt in the chat's directory.
    return HistorySearch(repo, data_dir)


def user(text: str, name: str | None = "Anna") -> Message:
    return Message(role="user", content=text, user_id=7, name=name)


def bot(text: str) -> Message:
    return Message(role="assistant", content=text)


def filler(count: int, start: int = 0) -> list[Message]:
    topics = ["weather", "coffee", "погода", "кофе", "movies", "фильмы", "work", "работа"]
    return [
        (user if i % 2 == 0 else bot)(f"small talk {i} about {topics[i % len(topics)]}")
        for i in range(start, start + count)
    ]


async def contents(search: HistorySearch, query: str, limit: int = 5) -> list[str]:
    return [hit.content for hit in await search.search(CHAT, query, limit)]


# -- ranking quality ----------------------------------------------------------------------


async def test_recall_at_5_on_a_long_conversation_with_planted_facts(
    repo: FileRepository, search: HistorySearch, capsys: pytest.CaptureFixture[str]
) -> None:
    conversation = generate_conversation(5000)
    for start in range(0, len(conversation.messages), 1000):
        await repo.append(CHAT, conversation.messages[start : start + 1000])
    assert len(conversation.probes) == len(FACTS) == 30

    async def seqs(query: str, k: int) -> list[int]:
        return [hit.seq for hit in await search.search(CHAT, query, k)]

    recall, misses = await recall_at_k(seqs, conversation.probes, k=5)
    with capsys.disabled():
        print(f"\nsearch recall@5 on 5000 messages, {len(FACTS)} planted facts: {recall:.3f}")
    assert recall >= 0.9, f"recall@5 = {recall:.3f}; missed: {[m.query for m in misses]}"


async def test_russian_word_forms_find_each_other(
    repo: FileRepository, search: HistorySearch
) -> None:
    await repo.append(
        CHAT,
        [
            user("Моя сестра живёт в Казани"),
            bot("Здорово, Казань красивый город"),
            user("Запись к стоматологу в четверг"),
            user("Мы взяли котёнка"),
            *filler(20),
        ],
    )
    assert (await contents(search, "где живет сестру"))[0] == "Моя сестра живёт в Казани"
    assert (await contents(search, "записи стоматолог"))[0] == "Запись к стоматологу в четверг"
    # Snowball stems "котёнка" and "котенок" differently; the prefix column bridges them.
    assert (await contents(search, "котенок"))[0] == "Мы взяли котёнка"
    assert set(await contents(search, "казань")) == {
        "Моя сестра живёт в Казани",
        "Здорово, Казань красивый город",
    }


async def test_english_word_forms_find_each_other(
    repo: FileRepository, search: HistorySearch
) -> None:
    await repo.append(CHAT, [user("I parked the car on level 3"), *filler(20)])
    assert await contents(search, "parking levels") == ["I parked the car on level 3"]


async def test_more_matching_words_rank_higher(repo: FileRepository, search: HistorySearch) -> None:
    await repo.append(
        CHAT,
        [
            user("the car is red"),
            user("the car is on level 3 of the garage"),
            user("level up in the game"),
            *filler(10),
        ],
    )
    hits = await search.search(CHAT, "car garage level")
    assert hits[0].content == "the car is on level 3 of the garage"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_a_hit_carries_the_date_role_and_author(
    repo: FileRepository, search: HistorySearch
) -> None:
    when = datetime(2025, 3, 1, 14, 2, 33, 125000, tzinfo=UTC)
    await repo.append(
        CHAT, [Message(role="user", content="Olga lives in Kazan", ts=when, name="Anna")]
    )
    (hit,) = await search.search(CHAT, "Kazan")
    assert hit == SearchHit(
        seq=1, ts=when, role="user", name="Anna", content="Olga lives in Kazan", score=hit.score
    )
    assert hit.score > 0


# -- what is searched -----------------------------------------------------------------------


async def test_tool_messages_are_not_searched(repo: FileRepository, search: HistorySearch) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": "{}"}}
    await repo.append(
        CHAT,
        [
            user("what is the xyzzy constant?"),
            Message(role="assistant", content="", tool_calls=(call,)),
            Message(role="tool", content="xyzzy plugh result 42", tool_call_id="c1"),
            bot("It is 42."),
        ],
    )
    assert await contents(search, "xyzzy plugh") == ["what is the xyzzy constant?"]


async def test_messages_appended_later_are_found_without_a_rebuild(
    repo: FileRepository,
    search: HistorySearch,
    data_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await repo.append(CHAT, [user("the lighthouse keeper"), *filler(50)])
    assert await contents(search, "lighthouse") == ["the lighthouse keeper"]
    await repo.append(CHAT, [*filler(30, start=50), user("another lighthouse in Norway")])
    caplog.set_level(logging.INFO, logger=INDEX_LOGGER)
    assert set(await contents(search, "lighthouse")) == {
        "the lighthouse keeper",
        "another lighthouse in Norway",
    }
    # A restarted bot (a new HistorySearch over the same files) also just catches up.
    await repo.append(CHAT, [user("a third lighthouse")])
    restarted = HistorySearch(FileRepository(data_dir), data_dir)
    hits = await restarted.search(CHAT, "lighthouse")
    assert len(hits) == 3
    assert len({hit.seq for hit in hits}) == 3
    assert not [r for r in caplog.records if "search index" in r.getMessage()], caplog.text


async def test_reset_and_drop_forget_the_old_chat(
    repo: FileRepository, search: HistorySearch
) -> None:
    await repo.append(CHAT, [user("my old secret is pineapple"), *filler(10)])
    assert await contents(search, "pineapple") == ["my old secret is pineapple"]
    await repo.reset(CHAT)
    await search.drop(CHAT)
    assert await search.search(CHAT, "pineapple") == []
    await repo.append(CHAT, [user("a new life, a new pineapple"), *filler(20)])
    assert await contents(search, "pineapple") == ["a new life, a new pineapple"]


async def test_a_reset_without_drop_never_brings_old_messages_back(
    repo: FileRepository, tmp_path: Path
) -> None:
    # Index kept outside the chat directory, so the repository's reset cannot delete it:
    # only noticing that the chat was created anew protects the new chat from the old one.
    search = HistorySearch(repo, tmp_path / "index")
    await repo.append(CHAT, [user("the old launch code is 0000"), *filler(40)])
    assert await contents(search, "launch code") == ["the old launch code is 0000"]
    before = (await repo.get_meta(CHAT)).created_at
    await repo.reset(CHAT)
    # More messages than before: a shorter archive is not what gives the reset away.
    await repo.append(CHAT, [*filler(60), user("the new launch is on Friday")])
    assert (await repo.get_meta(CHAT)).created_at != before
    assert await contents(search, "launch code") == ["the new launch is on Friday"]
    assert await contents(search, "0000") == []


async def test_drop_is_idempotent_and_search_rebuilds_after_it(
    repo: FileRepository, search: HistorySearch
) -> None:
    await search.drop(CHAT)  # nothing indexed yet
    await repo.append(CHAT, [user("the blue umbrella"), *filler(10)])
    assert await contents(search, "umbrella") == ["the blue umbrella"]
    await search.drop(CHAT)
    await search.drop(CHAT)
    assert not search.index_path(CHAT).exists()
    assert await contents(search, "umbrellas") == ["the blue umbrella"]


async def test_an_unknown_chat_finds_nothing_and_leaves_no_trace(
    search: HistorySearch, data_dir: Path
) -> None:
    assert await search.search(CHAT, "anything") == []
    assert await search.search(SESSION, "anything") == []
    assert not (data_dir / "42").exists()
    assert not (data_dir / "api").exists()


async def test_an_api_session_has_its_own_index_and_sees_only_its_own_messages(
    repo: FileRepository, search: HistorySearch, data_dir: Path
) -> None:
    await repo.append(CHAT, [user("the telegram secret is mango"), *filler(5)])
    await repo.append(SESSION, [user("the api secret is papaya"), *filler(5)])
    assert await contents(search, "secret") == ["the telegram secret is mango"]
    hits = await search.search(SESSION, "secret")
    assert [hit.content for hit in hits] == ["the api secret is papaya"]
    assert search.index_path(SESSION) == data_dir / "api" / SESSION.key / "search.sqlite3"
    assert search.index_path(SESSION).exists()
    assert search.index_path(CHAT) == data_dir / "42" / "search.sqlite3"


# -- robustness -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "sister*",
        "NEAR(sister Kazan)",
        "sister AND (Kazan",
        "sister NOT Kazan",
        "-sister",
        "stems: sister",
        "{stems prefixes}: sister",
        "^sister",
        "sister + Kazan",
        "sister OR OR Kazan'",
        'сестра: "Казань',
    ],
)
async def test_fts_syntax_in_a_query_is_just_text(
    repo: FileRepository, search: HistorySearch, query: str
) -> None:
    await repo.append(CHAT, [user("My sister lives in Kazan"), user("Сестра живёт в Казани")])
    assert await search.search(CHAT, query)


@pytest.mark.parametrize("query", ['"', '""""', "*", "OR", "AND AND", "NOT", "(", ":"])
async def test_a_query_of_operators_does_not_fail(
    repo: FileRepository, search: HistorySearch, query: str
) -> None:
    await repo.append(CHAT, [user("My sister lives in Kazan"), user("this OR that, AND not")])
    hits = await search.search(CHAT, query)
    assert all(hit.content != "My sister lives in Kazan" for hit in hits)


@pytest.mark.parametrize("query", ["", "   ", "?!", "—", "***"])
async def test_a_query_without_words_finds_nothing(
    repo: FileRepository, search: HistorySearch, query: str
) -> None:
    await repo.append(CHAT, [user("hello there")])
    assert await search.search(CHAT, query) == []


async def test_limit_is_kept_between_1_and_50(repo: FileRepository, search: HistorySearch) -> None:
    await repo.append(CHAT, [user(f"banana number {i}") for i in range(80)])
    assert len(await search.search(CHAT, "banana", limit=0)) == 1
    assert len(await search.search(CHAT, "banana", limit=7)) == 7
    assert len(await search.search(CHAT, "banana", limit=1000)) == 50


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
async def test_a_damaged_index_is_rebuilt_transparently(
    repo: FileRepository, search: HistorySearch, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    await repo.append(CHAT, [user(f"note {i}: " + "lorem ipsum " * 20) for i in range(2000)])
    await repo.append(CHAT, [user("the treasure is under the oak")])
    assert await contents(search, "treasure") == ["the treasure is under the oak"]
    path = search.index_path(CHAT)
    if damage == "garbage":
        path.write_bytes(b"this is not a database" * 500)
    elif damage == "truncated":
        with open(path, "r+b") as fh:
            fh.truncate(path.stat().st_size // 2)
    else:
        path.write_bytes(b"")
    caplog.set_level(logging.INFO, logger=INDEX_LOGGER)
    assert await contents(search, "treasure") == ["the treasure is under the oak"]
    assert len(await search.search(CHAT, "lorem", limit=50)) == 50
    assert "building the search index" in caplog.text


async def test_concurrent_searches_index_once(repo: FileRepository, search: HistorySearch) -> None:
    await repo.append(CHAT, [*filler(3000), user("the password is swordfish")])
    results = await asyncio.gather(
        *(search.search(CHAT, "swordfish password", 5) for _ in range(6)),
        search.search(CHAT, "small talk weather", 50),
    )
    for hits in results[:-1]:
        assert [h.content for h in hits] == ["the password is swordfish"]
    seqs = [h.seq for h in results[-1]]
    assert len(seqs) == 50 and len(set(seqs)) == 50


def test_stemming_runs_at_c_speed() -> None:
    # Snowball's own package hands out PyStemmer's C stemmers when PyStemmer is installed (it
    # is a dependency): a 100,000-message archive is stemmed in well under a second.
    import snowballstemmer  # type: ignore[import-untyped]

    assert type(snowballstemmer.stemmer("russian")).__module__ == "Stemmer"
