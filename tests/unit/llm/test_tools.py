"""The tool-calling machinery (membot.llm.tools): schemas from signatures, and the executor's
error paths. It knows nothing of what a context holds: these tests give it the bare base."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Literal

import pytest
from pydantic import Field

from membot.core.tools.builtin import builtin
from membot.llm.tools import ToolCall, ToolContext, ToolError, ToolExecutor, ToolRegistry


@pytest.fixture
def ctx() -> ToolContext:
    return ToolContext()


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
            call("search_history", {"query": "x" * 501}),
        ],
        ctx,
    )
    assert "invalid arguments for calculate: expression: Field required" in missing.content
    assert "precise" in extra.content
    assert "query" in wrong.content and "at most 500 characters" in wrong.content
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
