"""The built-in tools (membot.core.tools): facts, the consultation switch, time, search,
and the calculator behind `calculate`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from membot.core.tools.builtin import MAX_FACTS, builtin
from membot.core.tools.calc import CalcError, evaluate
from membot.core.tools.context import TurnContext
from membot.ids import ConversationId
from membot.llm.tools import ToolCall, ToolExecutor
from membot.memory import MemoryRepository, Message
from membot.memory.files import FileRepository
from membot.search import HistorySearch
from membot.tool_names import BUILTIN_TOOL_NAMES

CHAT = ConversationId.telegram(7)


@pytest.fixture
async def repo(tmp_path: Path) -> FileRepository:
    return FileRepository(tmp_path)


@pytest.fixture
def ctx(repo: FileRepository) -> TurnContext:
    return TurnContext(conversation=CHAT, repository=repo)


def call(name: str, arguments: object = None, *, raw: str | None = None) -> ToolCall:
    text = raw if raw is not None else json.dumps(arguments or {})
    return ToolCall(id=f"id-{name}", name=name, arguments=text)


# ---- the registry of built-ins -------------------------------------------------------------


def test_subset_keeps_order_and_rejects_unknown_names() -> None:
    assert builtin.subset(["calculate", "remember"]).names() == ["remember", "calculate"]
    with pytest.raises(KeyError):
        builtin.subset(["calculate", "rm_rf"])
    assert BUILTIN_TOOL_NAMES == (
        "search_history",
        "remember",
        "forget",
        "forget_messages",
        "current_datetime",
        "calculate",
        "start_consultation",
        "schedule_task",
        "list_tasks",
        "cancel_task",
        "set_timezone",
    )
    # config checks TOOLS against the names alone (membot.tool_names): the same list.
    assert tuple(builtin.names()) == BUILTIN_TOOL_NAMES


# ---- built-ins ---------------------------------------------------------------------------


async def test_remember_forget_keep_facts_on_disk(
    ctx: TurnContext, repo: FileRepository, tmp_path: Path
) -> None:
    executor = ToolExecutor(builtin, timeout=5)
    first, again, second = await executor.run(
        [
            call("remember", {"fact": "The user's name is Anna"}),
            call("remember", {"fact": "the user's name is anna"}),
            call("remember", {"fact": "Anna likes green tea"}),
        ],
        ctx,
    )
    # Concurrent calls on one chat must not lose a write: exactly one of the two kept it.
    assert {first.content.split(":")[0], again.content.split(":")[0]} == {
        "Remembered",
        "Already remembered",
    }
    assert second.content == "Remembered: Anna likes green tea"
    stored = json.loads((tmp_path / "7" / "facts.json").read_text())
    assert len(stored["facts"]) == 2

    [gone] = await executor.run([call("forget", {"fact": "green tea"})], ctx)
    assert gone.content == "Forgot: Anna likes green tea"
    [missing] = await executor.run([call("forget", {"fact": "coffee"})], ctx)
    assert missing.content.startswith("Error: no remembered fact matches 'coffee'")
    assert await repo.get_facts(CHAT) in (["The user's name is Anna"], ["the user's name is anna"])


async def test_remember_says_when_the_facts_are_full() -> None:
    repo = MemoryRepository()
    for i in range(MAX_FACTS):
        assert await repo.add_fact(CHAT, f"fact {i}", MAX_FACTS)
    ctx = TurnContext(conversation=CHAT, repository=repo)
    new, known = await ToolExecutor(builtin, timeout=5).run(
        [call("remember", {"fact": "one more"}), call("remember", {"fact": "FACT 3"})], ctx
    )
    assert new.content == f"Error: {MAX_FACTS} facts are already kept; forget some first"
    assert known.content == "Already remembered: FACT 3"
    assert len(await repo.get_facts(CHAT)) == MAX_FACTS


class RecordingSwitch:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int | None]] = []

    def start(self, request: str, rounds: int | None) -> str:
        self.calls.append((request, rounds))
        return "Consultation started."


async def test_start_consultation_goes_through_the_turns_switch(repo: FileRepository) -> None:
    switch = RecordingSwitch()
    ctx = TurnContext(conversation=CHAT, repository=repo, consultation=switch)
    executor = ToolExecutor(builtin, timeout=5)
    with_rounds, default = await executor.run(
        [
            call("start_consultation", {"request": "  plan   my\ntrip ", "rounds": 4}),
            call("start_consultation", {"request": "pick a laptop"}),
        ],
        ctx,
    )
    assert with_rounds.content == default.content == "Consultation started."
    # The request is kept as written (the final round quotes it verbatim), only trimmed.
    assert switch.calls == [("plan   my\ntrip", 4), ("pick a laptop", None)]
    # Nothing is stored by the tool itself: the switch is committed with the turn.
    assert (await repo.get_meta(CHAT)).state.mode == "chat"


async def test_start_consultation_outside_plain_chat_is_an_error(ctx: TurnContext) -> None:
    [result] = await ToolExecutor(builtin, timeout=5).run(
        [call("start_consultation", {"request": "plan my trip"})], ctx
    )
    assert not result.ok
    assert result.content == "Error: a consultation cannot be started now"


async def test_current_datetime_in_a_time_zone(ctx: TurnContext) -> None:
    executor = ToolExecutor(builtin, timeout=5)
    ok, bad = await executor.run(
        [
            call("current_datetime", {"timezone": "Asia/Tokyo"}),
            call("current_datetime", {"timezone": "Mars/Olympus"}),
        ],
        ctx,
    )
    stamp = ok.content.split(" ")[0]
    assert datetime.fromisoformat(stamp).utcoffset().total_seconds() == 9 * 3600  # type: ignore[union-attr]
    assert "Asia/Tokyo" in ok.content
    assert bad.content.startswith("Error: unknown time zone 'Mars/Olympus'")


async def test_search_history_without_search_says_so(ctx: TurnContext) -> None:
    [result] = await ToolExecutor(builtin, timeout=5).run(
        [call("search_history", {"query": "cats"})], ctx
    )
    assert result.content == "Error: the archive search is not available"


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 + 2 * 2", 6),
        ("(1250 * 0.13) + sqrt(144)", 174.5),
        ("2^10", 1024),
        ("2 ** -1", 0.5),
        ("-(3 - 5) % 3", 2),
        ("max(1, 7, 3) // 2", 3),
        ("round(pi, 3)", 3.142),
        ("factorial(10)", 3628800),
        ("10 ÷ 4 × 2", 5),
    ],
)
def test_calculate_arithmetic(expression: str, value: float) -> None:
    assert evaluate(expression) == pytest.approx(value)


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("__import__('os').system('id')", "not allowed"),
        ("open('/etc/passwd')", "not allowed"),
        ("(1).__class__", "not allowed"),
        ("x + 1", "not allowed"),
        ("[1, 2]", "not allowed"),
        ("1 / 0", "division by zero"),
        ("9 ** 9 ** 9", "too large"),
        ("10 ** 100000", "too large"),
        ("factorial(100000)", "factorial"),
        ("1e308 * 10", "finite"),
        ("sqrt(-1)", "math error"),
        ("2 +", "cannot parse"),
        ("1+" * 400 + "1", "longer than"),
    ],
)
def test_calculate_refuses_unsafe_or_impossible(expression: str, error: str) -> None:
    with pytest.raises(CalcError, match=error):
        evaluate(expression)


def at_noon() -> datetime:
    return datetime(2025, 6, 5, 12, 0, tzinfo=UTC)


async def stored_chat(repo: FileRepository) -> None:
    start = datetime(2025, 3, 1, 14, 2, tzinfo=UTC)
    await repo.append(
        CHAT,
        [
            Message(role="user", content="My sister Olga lives in Kazan", ts=start, name="Anna"),
            Message(role="assistant", content="Kazan is a lovely city!", ts=start),
            *(
                Message(
                    role="user",
                    content=f"small talk {i}" + " about zebras" * (i % 4 == 0),
                    ts=start + timedelta(days=1),
                )
                for i in range(300)
            ),
        ],
    )


async def test_search_history_shows_dated_excerpts_within_the_budget(
    repo: FileRepository, tmp_path: Path
) -> None:
    await stored_chat(repo)
    search = HistorySearch(repo, tmp_path)
    ctx = TurnContext(conversation=CHAT, repository=repo, search=search, clock=at_noon)
    executor = ToolExecutor(builtin, timeout=5)
    [result] = await executor.run([call("search_history", {"query": "where is Olga"})], ctx)
    header, *lines = result.content.split("\n\n")[1].splitlines()
    assert header.startswith("--- 2025-03-01") and header.endswith(" (3 months ago) ---")
    assert lines[:2] == [
        "[#1] [2025-03-01 14:02] user (Anna): My sister Olga lives in Kazan",
        "[#2] [2025-03-01 14:02] assistant: Kazan is a lovely city!",
    ]
    # The chat's budget (SEARCH_BUDGET_TOKENS) bounds what a search shows.
    small = TurnContext(
        conversation=CHAT, repository=repo, search=search, search_budget=500, clock=at_noon
    )
    [wide] = await executor.run([call("search_history", {"query": "zebras"})], ctx)
    [narrow] = await executor.run([call("search_history", {"query": "zebras"})], small)
    assert 500 * 3 >= len(narrow.content) > 1000
    assert 2000 * 3 >= len(wide.content) > 5000  # about 30 short excerpts


async def test_search_history_in_a_period(repo: FileRepository, tmp_path: Path) -> None:
    def said(day: datetime, text: str) -> list[Message]:
        # Each with a reply that does not say it: shown after it, whatever the period.
        return [
            Message(role="user", content=text, ts=day, name="Anna"),
            Message(role="assistant", content="Noted.", ts=day),
        ]

    await repo.append(
        CHAT,
        [
            *said(datetime(2025, 3, 1, 9, tzinfo=UTC), "the boiler broke again"),
            *said(datetime(2025, 6, 1, 0, 0, tzinfo=UTC), "the boiler was fixed in June"),
            *said(datetime(2025, 8, 31, 23, 59, tzinfo=UTC), "boiler serviced, end of summer"),
            *said(datetime(2025, 9, 1, 0, 0, tzinfo=UTC), "the boiler is fine in autumn"),
        ],
    )
    ctx = TurnContext(
        conversation=CHAT, repository=repo, search=HistorySearch(repo, tmp_path), clock=at_noon
    )

    async def found(**period: str) -> list[str]:
        [result] = await ToolExecutor(builtin, timeout=5).run(
            [call("search_history", {"query": "boiler", **period})], ctx
        )
        texts = (line.split(": ", 1)[-1] for line in result.content.splitlines())
        return sorted(text for text in texts if "boiler" in text)

    # Both days count in full: "last summer" is since=2025-06-01, until=2025-08-31.
    assert await found(since="2025-06-01", until="2025-08-31") == [
        "boiler serviced, end of summer",
        "the boiler was fixed in June",
    ]
    assert await found(until="2025-05-31") == ["the boiler broke again"]
    assert len(await found()) == 4


@pytest.mark.parametrize(
    ("period", "error"),
    [
        ({"since": "last summer"}, "since must be an ISO date like 2025-06-01"),
        ({"until": "2025-13-01"}, "until must be an ISO date like 2025-06-01"),
        ({"since": "2025-06-01", "until": "2025-05-01"}, "must be later than since"),
    ],
)
async def test_search_history_says_what_a_date_must_look_like(
    repo: FileRepository, tmp_path: Path, period: dict[str, str], error: str
) -> None:
    await stored_chat(repo)
    ctx = TurnContext(conversation=CHAT, repository=repo, search=HistorySearch(repo, tmp_path))
    [result] = await ToolExecutor(builtin, timeout=5).run(
        [call("search_history", {"query": "Olga", **period})], ctx
    )
    assert not result.ok
    assert result.content.startswith("Error: ") and error in result.content
