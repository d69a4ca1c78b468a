"""Tool registry (schemas from signatures), the executor's error paths, and the built-ins."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import Field

from membot.ids import ConversationId
from membot.llm.tools import ToolCall, ToolContext, ToolError, ToolExecutor, ToolRegistry
from membot.llm.tools.builtin import BUILTIN_TOOL_NAMES, MAX_FACTS, builtin
from membot.llm.tools.calc import CalcError, evaluate
from membot.memory import MemoryRepository
from membot.memory.files import FileRepository

CHAT = ConversationId.telegram(7)


@pytest.fixture
async def repo(tmp_path: Path) -> FileRepository:
    return FileRepository(tmp_path)


@pytest.fixture
def ctx(repo: FileRepository) -> ToolContext:
    return ToolContext(conversation=CHAT, repository=repo)


def call(name: str, arguments: object = None, *, raw: str | None = None) -> ToolCall:
    text = raw if raw is not None else json.dumps(arguments or {})
    return ToolCall(id=f"id-{name}", name=name, arguments=text)


# ---- the registry ----------------------------------------------------------------------


def test_schema_comes_from_signature_and_docstring() -> None:
    registry = ToolRegistry()

    @registry.tool
    async def book_table(
        ctx: ToolContext,
        restaurant: str,
        people: Annotated[int, Field(ge=1, le=20)] = 2,
        area: Literal["inside", "terrace"] | None = None,
    ) -> str:
        """Book a table.

        Args:
            restaurant: Where to book.
            people: How many guests,
                including the user.
            area: Where to sit.
        """
        return "ok"

    tool = registry.get("book_table")
    assert tool is not None and tool.takes_context
    schema = tool.openai_schema()["function"]
    assert schema["description"] == "Book a table."
    params = schema["parameters"]
    assert params["required"] == ["restaurant"]
    assert params["additionalProperties"] is False
    assert params["properties"]["restaurant"] == {"description": "Where to book.", "type": "string"}
    people = params["properties"]["people"]
    assert (people["type"], people["minimum"], people["maximum"], people["default"]) == (
        "integer",
        1,
        20,
        2,
    )
    assert people["description"] == "How many guests, including the user."
    assert "ctx" not in params["properties"]


def test_registry_refuses_what_would_be_a_broken_tool() -> None:
    registry = ToolRegistry()

    def sync_tool(x: int) -> str:
        """Sync."""
        return ""

    async def undocumented(x: int) -> str:
        return ""

    with pytest.raises(TypeError, match="async"):
        registry.tool(sync_tool)
    with pytest.raises(TypeError, match="docstring"):
        registry.tool(undocumented)


def test_subset_keeps_order_and_rejects_unknown_names() -> None:
    assert builtin.subset(["calculate", "remember"]).names() == ["remember", "calculate"]
    with pytest.raises(KeyError):
        builtin.subset(["calculate", "rm_rf"])
    assert BUILTIN_TOOL_NAMES == (
        "search_history",
        "remember",
        "forget",
        "current_datetime",
        "calculate",
        "start_consultation",
    )


# ---- the executor: every failure is a result the model reads ---------------------------


async def test_unknown_tool_lists_the_available_ones(ctx: ToolContext) -> None:
    [result] = await ToolExecutor(builtin, timeout=5).run([call("weather", {})], ctx)
    assert not result.ok
    assert result.content.startswith("Unknown tool: weather. Available tools: search_history,")


async def test_arguments_that_are_not_json_get_the_error_and_schema(ctx: ToolContext) -> None:
    [result] = await ToolExecutor(builtin, timeout=5).run(
        [call("calculate", raw='{"expression": 2+2')], ctx
    )
    assert "not valid JSON" in result.content
    assert '"expression"' in result.content  # the schema


async def test_schema_violations_name_the_field_and_show_the_schema(ctx: ToolContext) -> None:
    executor = ToolExecutor(builtin, timeout=5)
    missing, extra, wrong = await executor.run(
        [
            call("calculate", {}),
            call("calculate", {"expression": "1", "precise": True}),
            call("search_history", {"query": "x", "limit": 500}),
        ],
        ctx,
    )
    assert "invalid arguments for calculate: expression: Field required" in missing.content
    assert "precise" in extra.content
    assert "limit" in wrong.content and "less than or equal to 20" in wrong.content
    assert all('"properties"' in r.content for r in (missing, extra, wrong))


async def test_a_raising_tool_reports_error_text(ctx: ToolContext) -> None:
    registry = ToolRegistry()

    @registry.tool
    async def explode(why: str) -> str:
        """Always fails.

        Args:
            why: The reason.
        """
        if why == "expected":
            raise ToolError("nothing to do")
        raise RuntimeError(why)

    executor = ToolExecutor(registry, timeout=5)
    expected, crash = await executor.run(
        [call("explode", {"why": "expected"}), call("explode", {"why": "bug"})], ctx
    )
    assert expected.content == "Error: nothing to do"
    assert crash.content == "Error: RuntimeError: bug"
    assert not expected.ok and not crash.ok


async def test_timeout_and_concurrency_results_in_call_order(ctx: ToolContext) -> None:
    registry = ToolRegistry()
    started: list[str] = []
    all_started = asyncio.Event()
    never = asyncio.Event()

    @registry.tool
    async def wait(label: str) -> str:
        """Waits until every call has started, so it only finishes if they run concurrently.

        Args:
            label: Its name.
        """
        started.append(label)
        if len(started) == 3:
            all_started.set()
        if label == "stuck":
            await never.wait()
        await all_started.wait()
        return f"done {label}"

    executor = ToolExecutor(registry, timeout=0.5)
    results = await executor.run(
        [
            call("wait", {"label": "a"}),
            call("wait", {"label": "stuck"}),
            call("wait", {"label": "b"}),
        ],
        ctx,
    )
    assert [r.content for r in results] == [
        "done a",
        "Error: wait did not finish within 0.5 s.",
        "done b",
    ]


async def test_large_results_are_capped(ctx: ToolContext) -> None:
    registry = ToolRegistry()

    @registry.tool
    async def big() -> str:
        """Returns a lot."""
        return "x" * 50_000

    [result] = await ToolExecutor(registry, timeout=5, max_result_chars=1000).run(
        [call("big", {})], ctx
    )
    assert len(result.content) < 1100
    assert result.content.endswith("[49000 more characters cut]")


# ---- built-ins ---------------------------------------------------------------------------


async def test_remember_forget_keep_facts_on_disk(
    ctx: ToolContext, repo: FileRepository, tmp_path: Path
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
    ctx = ToolContext(conversation=CHAT, repository=repo)
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
    ctx = ToolContext(conversation=CHAT, repository=repo, consultation=switch)
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


async def test_start_consultation_outside_plain_chat_is_an_error(ctx: ToolContext) -> None:
    [result] = await ToolExecutor(builtin, timeout=5).run(
        [call("start_consultation", {"request": "plan my trip"})], ctx
    )
    assert not result.ok
    assert result.content == "Error: a consultation cannot be started now"


async def test_current_datetime_in_a_time_zone(ctx: ToolContext) -> None:
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


async def test_search_history_without_search_says_so(ctx: ToolContext) -> None:
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
