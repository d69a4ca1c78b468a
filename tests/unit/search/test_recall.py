"""The recall set (tests/fakes/recall_corpus.py): hard by construction, each kind of
question hard the way real conversations are, and today's recall per kind held as floors, so
that a change that loses recall fails here.

The index is built and every question searched once per module (a few seconds)."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import date, timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from membot.ids import ConversationId
from membot.memory import FileRepository, Message
from membot.search import HistorySearch
from membot.search.text import STOPWORDS, stems, words
from tests.fakes.recall_corpus import KINDS, Question, RecallSet, build, generate, measure, table
from tests.fakes.recall_items import PEOPLE

GROUP = ConversationId.telegram(-1_002_020)
RECALL_SET = generate()
_NAMES = {name.lower() for name in PEOPLE}
_FIRST_PERSON = {"i", "my", "me", "mine", "myself"}

# Each a little under the measured figure, so that one more question missed fails; raise
# them with each change that finds more (docs/testing.md says what each kind tests). With
# each message indexed alone (neighbours only as a question's context, no periods): all
# 0.434 / 0.537 at 5 / 10 on the first five kinds. With each message indexed with the turn
# before and after it and periods applied in the query: 0.640 / 0.713 (docs/architecture.md,
# "Archive search", has the figures of each change). The split kind (and its decoys, 176
# turns more) came after: 1.0 / 1.0 with the neighbour columns, 0.636 / 0.909 without them;
# the others moved with the new turns (neighbour 0.583 -> 0.500 at 5, dated 0.773 -> 0.727
# at 10).
FLOORS: dict[str, dict[str, float]] = {
    "neighbour": {"hits@5": 0.49, "hits@10": 0.61},
    "multi": {"hits@5": 0.62, "hits@10": 0.73},
    "person": {"hits@5": 0.89, "hits@10": 0.89},
    "paraphrase": {"hits@5": 0.44, "hits@10": 0.53},
    "dated": {"hits@5": 0.58, "hits@10": 0.72},
    "split": {"hits@5": 0.99, "hits@10": 0.99},
    "all": {"hits@5": 0.66, "hits@10": 0.74},
}
# What the model is shown since the result budget (search_history's excerpts at the default
# 2,000 tokens: about 64 of these short turns per question). When it landed: all 0.875; with
# the neighbour columns and periods: 0.934 (multi 0.978 -> 1.0, dated 0.682 -> 1.0); with
# the split kind: 0.943.
BUDGET_FLOORS: dict[str, float] = {
    "neighbour": 0.99,
    "multi": 0.99,
    "person": 0.89,
    "paraphrase": 0.67,
    "dated": 0.99,
    "split": 0.99,
    "all": 0.93,
}


def content(text: str) -> set[str]:
    """The stems a search could match on: no stopwords, single letters or people's names
    (a name is matched as the sender, not as a word of the message)."""
    return {
        stem
        for word, stem in zip(words(text), stems(text), strict=True)
        if word not in STOPWORDS and len(word) > 1 and word not in _NAMES
    }


def turn(seq: int) -> Message:
    return RECALL_SET.messages[seq - 1]


def of_kind(kind: str) -> list[Question]:
    return [q for q in RECALL_SET.questions if q.kind == kind]


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, float]]:
    root: Path = tmp_path_factory.mktemp("recall")

    async def run(recall_set: RecallSet) -> dict[str, dict[str, float]]:
        repo = FileRepository(root)
        try:
            await build(repo, GROUP, recall_set)
            return await measure(HistorySearch(repo, root), GROUP, recall_set.questions)
        finally:
            await repo.close()

    return asyncio.run(run(RECALL_SET))


def test_a_long_group_chat_over_many_dated_sessions_months_apart() -> None:
    messages, sessions = RECALL_SET.messages, RECALL_SET.sessions
    assert len(messages) >= 2000
    people = Counter(m.name for m in messages if m.role == "user")
    assert set(people) == set(PEOPLE) and min(people.values()) > 300
    assert all(PEOPLE[m.name] == m.user_id for m in messages if m.name)
    assert sum(m.role == "assistant" for m in messages) > 50
    assert len(sessions) >= 40
    days = [s.day for s in sessions]
    assert days == sorted(set(days))  # one session a day at most, in order
    assert days[-1] - days[0] > timedelta(days=365)
    assert max(b - a for a, b in pairwise(days)) >= timedelta(days=14)
    assert [s.first for s in sessions] == [1] + [s.last + 1 for s in sessions[:-1]]
    assert sessions[-1].last == len(messages)
    for session in sessions:
        assert {turn(seq).ts.date() for seq in (session.first, session.last)} == {session.day}
    assert [m.ts for m in messages] == sorted(m.ts for m in messages)


def test_every_kind_has_enough_questions_to_measure() -> None:
    counts = Counter(q.kind for q in RECALL_SET.questions)
    assert set(counts) == set(KINDS)
    assert min(counts.values()) >= 20
    for question in RECALL_SET.questions:
        assert question.asker in PEOPLE and question.asker != question.about
        assert all(turn(seq).name == question.about for seq in question.needed)


def test_a_neighbour_answer_has_none_of_the_questions_words_its_cue_has_them() -> None:
    for question in of_kind("neighbour"):
        [answer] = question.needed
        assert question.cue == answer - 1
        assert content(turn(answer).content).isdisjoint(content(question.text)), question
        assert content(turn(question.cue).content) & content(question.text), question
    # Some cues are not questions: a question's answer does not come along with them.
    cues = [turn(q.cue).content for q in of_kind("neighbour") if q.cue is not None]
    assert sum(not cue.rstrip().endswith("?") for cue in cues) >= 8


def test_a_person_answer_is_said_in_the_first_person_and_asked_in_the_third() -> None:
    for question in of_kind("person"):
        said = set(words(turn(question.needed[0]).content))
        asked = set(words(question.text))
        assert said & _FIRST_PERSON and question.about.lower() not in said, question
        assert question.about.lower() in asked and not asked & _FIRST_PERSON, question


def test_a_paraphrase_shares_at_most_one_word_with_its_question() -> None:
    shared = []
    for question in of_kind("paraphrase"):
        answer, asked = content(turn(question.needed[0]).content), content(question.text)
        assert len(answer & asked) <= 1 and asked - answer, question
        shared.append(len(answer & asked))
    assert shared.count(0) >= 5  # some share none at all


def test_a_multi_answer_needs_turns_from_different_days() -> None:
    for question in of_kind("multi"):
        days = {turn(seq).ts.date() for seq in question.needed}
        assert 2 <= len(question.needed) == len(days) <= 3, question
        for seq in question.needed:
            assert content(turn(seq).content) & content(question.text), (question, seq)
    assert any(len(q.needed) == 3 for q in of_kind("multi"))


def test_a_dated_question_names_a_period_and_the_topic_comes_up_in_others() -> None:
    for question in of_kind("dated"):
        assert question.since is not None and question.until is not None
        since, until = date.fromisoformat(question.since), date.fromisoformat(question.until)
        [answer] = question.needed
        assert since <= turn(answer).ts.date() < until
        topic = content(turn(answer).content) & content(question.text)
        elsewhere = [
            m
            for m in RECALL_SET.messages
            if m.name == question.about
            and topic & content(m.content)
            and not since <= m.ts.date() < until
        ]
        # The same person on the same topic at other times: without the period, the
        # wrong one may win.
        assert topic and len(elsewhere) >= 4, question


def test_a_split_questions_words_are_in_two_adjacent_turns_and_decoys_have_half() -> None:
    for question in of_kind("split"):
        [answer] = question.needed
        assert question.cue == answer - 1
        asked = content(question.text)
        first = content(turn(question.cue).content) & asked
        second = content(turn(answer).content) & asked
        # Neither turn has all the words: each has some the other lacks.
        assert first - second and second - first, question
        decoys = [
            m
            for m in RECALL_SET.messages
            if m.name == question.about
            and content(m.content) & second
            and not content(m.content) & first
            and m is not turn(answer)
        ]
        # The same person says the answer's share of the words on other days.
        assert len({m.ts.date() for m in decoys} - {turn(answer).ts.date()}) >= 3, question


def test_the_set_is_the_same_every_time() -> None:
    again = generate()
    assert again.questions == RECALL_SET.questions
    assert [(m.name, m.content, m.ts) for m in again.messages] == [
        (m.name, m.content, m.ts) for m in RECALL_SET.messages
    ]
    assert generate(seed=1).messages != RECALL_SET.messages


def test_recall_per_kind_holds_todays_floors(
    measured: dict[str, dict[str, float]], capsys: pytest.CaptureFixture[str]
) -> None:
    with capsys.disabled():
        print(f"\nrecall set: {len(RECALL_SET.messages)} turns\n{table(measured)}")
    below = {
        (kind, metric): (measured[kind][metric], floor)
        for kind, floors in FLOORS.items()
        for metric, floor in floors.items()
        if measured[kind][metric] < floor
    }
    below |= {
        (kind, "budget"): (measured[kind]["budget"], floor)
        for kind, floor in BUDGET_FLOORS.items()
        if measured[kind]["budget"] < floor
    }
    assert below == {}
    for row in measured.values():
        assert row["hits@10"] >= row["hits@5"]  # more hits find at least as much
