"""What `search_history` shows: hits with their neighbours, merged into dated excerpts, within
a budget (search/excerpts.py, search/present.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from membot.ids import ConversationId
from membot.memory import FileRepository, Message
from membot.search import Excerpt, HistorySearch, SearchHit, excerpts_json, format_excerpts
from membot.search.excerpts import (
    HEADER_CHARS,
    INTRO_CHARS,
    MAX_LINE_CHARS,
    Line,
    estimate_tokens,
    gather,
)
from membot.search.period import BadPeriod, parse_period
from membot.search.present import INTRO, age, header
from membot.search.store import index_summary
from membot.search.text import match_expression
from tests.fakes.search_corpus import generate_conversation

CHAT = ConversationId.telegram(42)
START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
NOW = datetime(2025, 6, 5, 9, 30, tzinfo=UTC)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def repo(data_dir: Path) -> FileRepository:
    return FileRepository(data_dir)


@pytest.fixture
def search(repo: FileRepository, data_dir: Path) -> HistorySearch:
    return HistorySearch(repo, data_dir)


def chat(texts: dict[int, str], length: int) -> list[Message]:
    """`length` messages a minute apart, Anna and the bot in turn; seq n (from 1) says
    `texts[n]`, or something that matches no query here."""
    return [
        Message(
            role="user" if seq % 2 else "assistant",
            name="Anna" if seq % 2 else None,
            content=texts.get(seq, f"small talk number {seq}"),
            ts=START + timedelta(minutes=seq),
        )
        for seq in range(1, length + 1)
    ]


def seqs(excerpt: Excerpt) -> list[int]:
    return [line.entry.seq for line in excerpt.lines]


def hit_seqs(excerpt: Excerpt) -> list[int]:
    return [line.entry.seq for line in excerpt.lines if line.hit]


# -- merging (the candidates chosen here, as the index would rank them) -----------------


async def indexed(repo: FileRepository, search: HistorySearch, messages: list[Message]) -> Path:
    await repo.append(CHAT, messages)
    await search.search(CHAT, "anything")  # builds the index
    return search.index_path(CHAT)


def found(messages: list[Message], *ranked: int) -> list[SearchHit]:
    """The messages with these seqs as hits, best first."""
    return [
        SearchHit(seq, m.ts, m.role, m.name, m.content, score=100.0 - n)
        for n, seq in enumerate(ranked)
        for m in [messages[seq - 1]]
    ]


def excerpts(path: Path, hits: list[SearchHit], budget: int = 2000) -> list[Excerpt]:
    return gather(path, hits, match_expression("zebra") or "", budget)


async def test_a_hit_comes_with_the_message_after_it(
    repo: FileRepository, search: HistorySearch
) -> None:
    messages = chat({}, 30)
    path = await indexed(repo, search, messages)
    [excerpt] = excerpts(path, found(messages, 5))
    assert seqs(excerpt) == [5, 6] and hit_seqs(excerpt) == [5]
    [last] = excerpts(path, found(messages, 30))
    assert seqs(last) == [30]


async def test_overlapping_neighbourhoods_are_one_chronological_excerpt(
    repo: FileRepository, search: HistorySearch
) -> None:
    messages = chat({}, 30)
    path = await indexed(repo, search, messages)
    # 6..7 and 5..6 share 6: one excerpt, each message once, in the order they were said;
    # 6, a neighbour of 5, is a hit and brings its own neighbour.
    [excerpt] = excerpts(path, found(messages, 6, 5))
    assert seqs(excerpt) == [5, 6, 7]
    assert hit_seqs(excerpt) == [5, 6]
    assert not any(line.gap_before for line in excerpt.lines)


async def test_touching_neighbourhoods_merge_and_distant_ones_do_not(
    repo: FileRepository, search: HistorySearch
) -> None:
    messages = chat({}, 40)
    path = await indexed(repo, search, messages)
    # 5..6 and 7..8 touch; 20..21 stands apart.
    shown = excerpts(path, found(messages, 5, 20, 7))
    assert [seqs(e) for e in shown] == [[5, 6, 7, 8], [20, 21]]


async def test_excerpts_come_best_first(repo: FileRepository, search: HistorySearch) -> None:
    messages = chat({}, 60)
    path = await indexed(repo, search, messages)
    shown = excerpts(path, found(messages, 25, 45, 5, 26))
    assert [hit_seqs(e) for e in shown] == [[25, 26], [45], [5]]
    assert [e.score for e in shown] == sorted((e.score for e in shown), reverse=True)


async def test_a_neighbour_skips_what_is_not_indexed(
    repo: FileRepository, search: HistorySearch
) -> None:
    messages = [
        Message(role="user", content="what does the zebra eat?", ts=START),
        Message(role="assistant", content="", ts=START),  # the call of a tool
        Message(role="tool", content="grass, mostly", ts=START),
        Message(role="assistant", content="Grass, mostly.", ts=START),
        *chat({}, 10),
    ]
    path = await indexed(repo, search, messages)
    [excerpt] = excerpts(path, found(messages, 1))
    assert [line.entry.content for line in excerpt.lines] == [
        "what does the zebra eat?",
        "Grass, mostly.",
    ]


async def test_a_candidate_that_does_not_fit_leaves_room_for_shorter_ones(
    repo: FileRepository, search: HistorySearch
) -> None:
    padding = " ".join(f"word{i}" for i in range(150))
    messages = chat({25: padding, 26: padding}, 60)
    path = await indexed(repo, search, messages)
    shown = excerpts(path, found(messages, 5, 25, 45), budget=300)
    assert [hit_seqs(e) for e in shown] == [[5], [45]]


# -- the budget ----------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [500, 800, 2000, 5000])
async def test_the_budget_is_never_passed(
    repo: FileRepository, search: HistorySearch, budget: int
) -> None:
    await repo.append(CHAT, generate_conversation(2000).messages)
    for query in ("car level book school", "машина ключ отчёт", "coffee weather"):
        shown = await search.recall(CHAT, query, budget_tokens=budget)
        assert shown
        assert estimate_tokens(format_excerpts(shown, NOW)) <= budget


def zebras(shown: list[Excerpt]) -> set[int]:
    return {
        line.entry.seq
        for excerpt in shown
        for line in excerpt.lines
        if line.hit and "zebra" in line.entry.content
    }


async def test_short_hits_show_more_than_ten(repo: FileRepository, search: HistorySearch) -> None:
    texts = {seq: f"zebra sighting {seq}" for seq in range(5, 400, 20)}
    await repo.append(CHAT, chat(texts, 400))
    assert zebras(await search.recall(CHAT, "zebra")) == set(texts)  # all 20
    # A smaller budget shows fewer, each with the message after it.
    few = await search.recall(CHAT, "zebra", budget_tokens=500)
    assert 2 <= len(zebras(few)) < 20
    for excerpt in few:
        assert {seq + 1 for seq in zebras([excerpt])} <= set(seqs(excerpt))


async def test_a_long_message_is_cut_in_the_text_and_whole_in_the_json(
    repo: FileRepository, search: HistorySearch
) -> None:
    long = "the zebra story " + "and then it went on " * 500
    await repo.append(CHAT, chat({5: long}, 20))
    shown = await search.recall(CHAT, "zebra")
    [line] = [t for t in format_excerpts(shown, NOW).splitlines() if "zebra" in t]
    assert line.startswith("[#5] [2025-03-01 12:05] user (Anna): the zebra story and then")
    assert line.endswith("…") and len(line.split(": ", 1)[1]) == MAX_LINE_CHARS
    [message] = [m for e in excerpts_json(shown) for m in e["messages"] if m["seq"] == 5]  # type: ignore[attr-defined]
    assert message["content"] == long


# -- dates ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("then", "text"),
    [
        (datetime(2025, 6, 5, 23, 0, tzinfo=UTC), "today"),  # a clock a little behind
        (datetime(2025, 6, 5, 0, 1, tzinfo=UTC), "today"),
        (datetime(2025, 6, 4, 23, 59, tzinfo=UTC), "yesterday"),
        (datetime(2025, 5, 30, tzinfo=UTC), "6 days ago"),
        (datetime(2025, 5, 10, tzinfo=UTC), "3 weeks ago"),
        (datetime(2025, 3, 1, tzinfo=UTC), "3 months ago"),
        (datetime(2024, 6, 6, tzinfo=UTC), "11 months ago"),
        (datetime(2023, 6, 5, tzinfo=UTC), "2 years ago"),
    ],
)
def test_age_is_said_as_a_person_would(then: datetime, text: str) -> None:
    assert age(then, NOW) == text


def test_the_longest_header_fits_in_what_the_budget_keeps_for_it() -> None:
    line = Line(SearchHit(1, datetime(2014, 1, 31, tzinfo=UTC), "user", None, "x", 1.0), True)
    later = Line(replace(line.entry, ts=datetime(2014, 2, 1, tzinfo=UTC)), True)
    longest = header(Excerpt((), (line, later), 1.0), datetime(2025, 12, 31, tzinfo=UTC))
    assert longest == "--- 2014-01-31 to 2014-02-01 (11 years ago) ---"
    assert len(longest) < HEADER_CHARS and len(INTRO) < INTRO_CHARS


async def test_every_line_is_dated_and_each_excerpt_says_how_long_ago(
    repo: FileRepository, search: HistorySearch
) -> None:
    messages = chat({}, 40)
    # From seq 24 on, a month and a half later, over midnight.
    later = START + timedelta(days=45, hours=11, minutes=58)
    messages[23:] = [
        replace(m, ts=later + timedelta(minutes=i)) for i, m in enumerate(messages[23:])
    ]
    path = await indexed(repo, search, messages)
    text = format_excerpts(excerpts(path, found(messages, 25, 24, 5)), NOW)
    assert text == "\n".join(
        [
            INTRO,
            "",
            "--- 2025-04-15 to 2025-04-16 (7 weeks ago) ---",
            "[#24] [2025-04-15 23:58] assistant: small talk number 24",
            "[#25] [2025-04-15 23:59] user (Anna): small talk number 25",
            "[#26] [2025-04-16 00:00] assistant: small talk number 26",
            "",
            "--- 2025-03-01 (3 months ago) ---",
            "[#5] [2025-03-01 12:05] user (Anna): small talk number 5",
            "[#6] [2025-03-01 12:06] assistant: small talk number 6",
        ]
    )


async def test_nothing_found_says_so(repo: FileRepository, search: HistorySearch) -> None:
    await repo.append(CHAT, chat({}, 10))
    assert await search.recall(CHAT, "zebra") == []
    assert format_excerpts([], NOW) == "No matching messages found."


# -- summaries, facts and documents as hits (their entries come from the index) ----------


def entry(kind: str, content: str, covers: tuple[int, int], score: float = 5.0) -> SearchHit:
    return SearchHit(covers[0], START, "system", None, content, score, kind=kind, covers=covers)


async def test_a_summary_shows_its_best_messages(
    repo: FileRepository, search: HistorySearch
) -> None:
    texts = {12: "the zebra arrived", 20: "zebra zebra fed", 30: "zebra outside the summary"}
    path = await indexed(repo, search, chat(texts, 60))
    summary = entry("summary", "Anna talked about the zoo's new zebra.", (10, 25))
    [excerpt] = gather(path, [summary], match_expression("zebra") or "", 2000)
    lines = format_excerpts([excerpt], NOW).splitlines()[3:]
    assert lines == [
        "(summary of this part of the chat) Anna talked about the zoo's new zebra.",
        "[#12] [2025-03-01 12:12] assistant: the zebra arrived",
        "…",
        "[#20] [2025-03-01 12:20] assistant: zebra zebra fed",
    ]
    [as_json] = excerpts_json([excerpt])
    assert as_json["hits"] == [12, 20] and as_json["neighbours"] == []
    assert as_json["notes"][0]["covers"] == [10, 25]  # type: ignore[index]


async def test_one_summary_speaks_for_the_snapshots_that_retell_it(
    repo: FileRepository, search: HistorySearch
) -> None:
    """The summary is rolling: each one retells the last, and the index keeps each as an
    entry, so a topic it kept matches many of them. One is shown; the budget goes to the
    messages, not to the same paragraph again and again."""
    texts = {seq: f"the zebra {seq} was fed" for seq in range(15, 200, 30)}
    path = await indexed(repo, search, chat(texts, 200))
    story = "Anna keeps the zoo's zebra and talks about feeding it, every few days."
    for n, last in enumerate(range(20, 200, 20)):
        index_summary(path, f"{story} Since then: visit {n}, " + "small talk " * 40, last)
    shown = await search.recall(CHAT, "zebra feeding", budget_tokens=1000)
    notes = [note for excerpt in shown for note in excerpt.notes]
    assert [note.kind for note in notes] == ["summary"]
    fed = {line.entry.seq for e in shown for line in e.lines if "fed" in line.entry.content}
    assert fed == set(texts)


async def test_a_fact_shows_the_turn_it_was_kept_in(
    repo: FileRepository, search: HistorySearch
) -> None:
    path = await indexed(repo, search, chat({15: "remember: my zebra is called Stripe"}, 60))
    fact = entry("fact", "Anna's zebra is called Stripe", (15, 15))
    message = SearchHit(15, START, "user", "Anna", "remember: my zebra is called Stripe", 3.0)
    # The fact and then its own message are found: shown once, with the message a hit.
    [excerpt] = gather(path, [fact, message], match_expression("zebra") or "", 2000)
    assert [n.content for n in excerpt.notes] == ["Anna's zebra is called Stripe"]
    assert seqs(excerpt) == [15, 16] and hit_seqs(excerpt) == [15]


async def test_a_documents_piece_is_shown_after_its_message(
    repo: FileRepository, search: HistorySearch
) -> None:
    path = await indexed(repo, search, chat({15: "here is the report"}, 60))
    piece = SearchHit(
        15, START, "user", "Anna", "[zoo.pdf] the zebra count is 12", 4.0, kind="document"
    )
    [excerpt] = gather(path, [piece], match_expression("zebra") or "", 2000)
    assert [line.entry.content for line in excerpt.lines] == [
        "here is the report",
        "[zoo.pdf] the zebra count is 12",
        "small talk number 16",
    ]
    assert [line.hit for line in excerpt.lines] == [False, True, False]


# -- periods -------------------------------------------------------------------------------


def test_a_period_takes_in_both_days_whole() -> None:
    assert parse_period("2025-06-01", "2025-08-31") == (
        datetime(2025, 6, 1, tzinfo=UTC),
        datetime(2025, 9, 1, tzinfo=UTC),
    )
    assert parse_period(None, " ") == (None, None)


def test_a_period_may_give_times_and_zones() -> None:
    since, until = parse_period("2025-06-01T18:30", "2025-06-02T09:00+03:00")
    assert since == datetime(2025, 6, 1, 18, 30, tzinfo=UTC)
    assert until == datetime(2025, 6, 2, 6, 0, tzinfo=UTC)


def test_a_period_at_the_ends_of_the_calendar_is_no_bound() -> None:
    """The day after 9999-12-31, or a time before year 1 in UTC, cannot be a datetime: no
    archive reaches them, so they bound nothing (and never fail the tool or the CLI)."""
    assert parse_period(None, "9999-12-31") == (None, None)
    assert parse_period("0001-01-01T00:30+01:00", "9999-12-31T23:59-01:00") == (None, None)
    assert parse_period("0001-01-01", None) == (datetime(1, 1, 1, tzinfo=UTC), None)


@pytest.mark.parametrize(
    ("since", "until"),
    [("June", None), (None, "2025-02-30"), ("2025-06-01", "2025-06-01T00:00"), ("1/6/25", None)],
)
def test_a_bad_period_says_what_is_expected(since: str | None, until: str | None) -> None:
    with pytest.raises(BadPeriod) as caught:
        parse_period(since, until)
    message = str(caught.value)
    assert "like 2025-06-01" in message or "later than" in message


async def test_a_kept_summary_and_fact_are_shown_with_their_messages(
    repo: FileRepository, search: HistorySearch
) -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "remember", "arguments": '{"fact": "Anna has a zebra, Stripe"}'},
    }
    messages = [
        *chat({3: "my zebra is called Stripe", 8: "Stripe the zebra ate my hat"}, 20),
        Message(role="user", content="remember my zebra's name", ts=START, name="Anna"),
        Message(role="assistant", content="", tool_calls=(call,), ts=START),
        Message(role="tool", content="Remembered", tool_call_id="c1", ts=START),
        Message(role="assistant", content="Noted!", ts=START),
        *chat({}, 10),
    ]
    await repo.append(CHAT, messages)
    generation = (await repo.get_meta(CHAT)).generation
    summary = "Anna talked about her zebra Stripe and its appetite."
    assert await repo.save_summary(CHAT, summary, 1, 12, generation)
    text = format_excerpts(await search.recall(CHAT, "Stripe"), NOW)
    assert f"(summary of this part of the chat) {summary}" in text
    assert "(remembered fact) Anna has a zebra, Stripe" in text
    # The fact's turn: the user's message and the answer (the tool's plumbing is not shown).
    fact_block = next(b for b in text.split("\n\n") if "(remembered fact)" in b)
    assert fact_block.splitlines()[2:] == [
        "[#21] [2025-03-01 12:00] user (Anna): remember my zebra's name",
        "[#24] [2025-03-01 12:00] assistant: Noted!",
    ]
    # Each message once, however many entries point at it.
    shown = [line for line in text.splitlines() if line.startswith("[")]
    assert len(shown) == len(set(shown))


def test_an_index_gone_since_the_search_shows_nothing_and_stays_gone(tmp_path: Path) -> None:
    # A reset drops the file between the search and the reading of the hits' neighbours.
    gone = tmp_path / "search.sqlite3"
    hit = SearchHit(1, START, "user", "Anna", "the zebra", 1.0)
    assert gather(gone, [hit], match_expression("zebra") or "", 2000) == []
    assert not gone.exists()
