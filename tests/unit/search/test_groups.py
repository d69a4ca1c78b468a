"""Archive search in groups: the sender's name is part of what a search matches, a message by
the person named beats one that only addresses them, and a hit that is half of a question
and its answer comes with the other half. The recall of a long generated group conversation
(tests/group_corpus.py) is the measure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from membot.ids import ConversationId
from membot.memory import FileRepository, Message
from membot.search import Excerpt, HistorySearch
from membot.search.excerpts import DEFAULT_BUDGET_TOKENS
from tests.group_corpus import generate_group

GROUP = ConversationId.telegram(-1005)
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def repo(tmp_path: Path) -> FileRepository:
    return FileRepository(tmp_path)


@pytest.fixture
def search(repo: FileRepository, tmp_path: Path) -> HistorySearch:
    return HistorySearch(repo, tmp_path)


def said(name: str, text: str, minutes: int = 0) -> Message:
    uid = sum(map(ord, name))
    return Message(
        role="user", content=text, name=name, user_id=uid, ts=T0 + timedelta(minutes=minutes)
    )


async def test_a_message_by_the_person_named_beats_one_addressed_to_them(
    repo: FileRepository, search: HistorySearch
) -> None:
    await repo.append(
        GROUP,
        [
            said("Boris", "Anna, did you decide about the trip?", 1),
            said("Anna", "For the trip I'd take the night train.", 2),
            said("Carla", "Anna and I talked about the trip yesterday.", 3),
        ],
    )
    hits = await search.search(GROUP, "what did Anna say about the trip", 3)
    assert hits[0].name == "Anna"
    assert hits[0].content == "For the trip I'd take the night train."


def lines(excerpt: Excerpt) -> list[tuple[str | None, bool]]:
    return [(line.entry.name, line.hit) for line in excerpt.lines]


async def test_a_question_is_shown_with_its_answer_and_an_answer_with_its_question(
    repo: FileRepository, search: HistorySearch
) -> None:
    await repo.append(
        GROUP,
        [
            said("Anna", "I had lunch already.", 1),
            said("Boris", "Carla, what time does the museum open on Sunday?", 2),
            said("Carla", "At nine, and it is free before ten.", 3),
            said("Dmitri", "Nice weather for a walk.", 4),
        ],
    )
    [question] = await search.recall(GROUP, "museum opening")
    assert lines(question)[:2] == [("Boris", True), ("Carla", False)]
    [answer] = await search.recall(GROUP, "free before ten")
    assert lines(answer) == [("Boris", False), ("Carla", True), ("Dmitri", False)]


async def test_only_a_question_by_someone_else_comes_before_a_hit(
    repo: FileRepository, search: HistorySearch
) -> None:
    await repo.append(
        GROUP,
        [
            said("Anna", "Shall we go out?", 1),
            said("Anna", "The weather is fine.", 2),
            said("Boris", "I had lunch already.", 3),
            said("Dmitri", "Ok then.", 4),
            said("Carla", "The weather is awful here.", 5),
        ],
    )
    found = await search.recall(GROUP, "weather")
    # Anna's own question is not what her message answers; Boris's lunch is not asked.
    assert sorted(lines(e) for e in found) == [
        [("Anna", True), ("Boris", False)],
        [("Carla", True)],
    ]


async def test_recall_on_a_long_group_conversation_by_speaker_and_question(
    repo: FileRepository, search: HistorySearch, capsys: pytest.CaptureFixture[str]
) -> None:
    group = generate_group(3000)
    await repo.append(GROUP, group.messages)
    assert len(group.probes) == 20

    async def found(budget: int) -> tuple[float, list[str]]:
        """The share of probes whose answer the model is shown, within `budget` tokens."""
        misses = []
        for probe in group.probes:
            shown = await search.recall(GROUP, probe.query, budget_tokens=budget)
            if probe.seq not in {line.entry.seq for e in shown for line in e.lines}:
                misses.append(probe.query)
        return 1 - len(misses) / len(group.probes), misses

    small, misses = await found(500)
    default, _ = await found(DEFAULT_BUDGET_TOKENS)
    with capsys.disabled():
        print(
            f"\ngroup search: shown {small:.2f} at 500 tokens, {default:.2f} at the default budget"
        )
    # Measured as hits (and a question's answer) at 5: 0.55 before; 0.70 with the sender
    # column; 0.95 with the question/answer pairs. As shown within a budget: 0.95 and 0.95.
    assert small >= 0.95, misses
    assert default >= small
