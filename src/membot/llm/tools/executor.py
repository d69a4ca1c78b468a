"""Runs the model's tool calls. Every failure becomes a tool result the model can read.

What goes back to the model (never raised to the agent):

    Unknown tool: NAME. Available tools: a, b.      the model named a tool we do not have
    Error: the arguments are not valid JSON ...     unparseable arguments, with the schema
    Error: invalid arguments for NAME: ...          schema violation, with the schema
    Error: <message>                                the tool raised ToolError (or crashed)
    Error: NAME did not finish within N s           TOOL_TIMEOUT (or the tool's own)

Only cancellation propagates: a turn being abandoned stops its tools.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from membot.llm.tools.registry import (
    Tool,
    ToolContext,
    ToolError,
    ToolImage,
    ToolOutput,
    ToolRegistry,
    describe_validation_error,
)

log = logging.getLogger(__name__)

# A search over a long archive can return a lot; the model's context is not a dump.
MAX_RESULT_CHARS = 8_000


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call as the model made it. `arguments` is the raw JSON text the model wrote.

    `error` is set when the call could not even be read (a Hermes block with broken JSON);
    the executor then answers with that error instead of running anything.
    """

    id: str
    name: str
    arguments: str = "{}"
    error: str | None = None

    def to_openai(self) -> dict[str, Any]:
        """The call in the OpenAI `tool_calls` shape: how every mode stores it.

        Some providers parse `arguments` of past calls and refuse the whole request when it
        is not JSON, so a call the model garbled is kept as `{"unparsed": "<what it wrote>"}`.
        """
        arguments = self.arguments
        try:
            json.loads(arguments)
        except json.JSONDecodeError:
            arguments = json.dumps({"unparsed": arguments}, ensure_ascii=False)
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": arguments},
        }

    @classmethod
    def from_openai(cls, data: dict[str, Any]) -> ToolCall:
        function = data.get("function") or {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {})
        return cls(
            id=str(data.get("id") or new_call_id()),
            name=str(function.get("name") or ""),
            arguments=arguments,
        )


@dataclass(frozen=True, slots=True)
class ToolResult:
    call: ToolCall
    content: str
    ok: bool
    # Images the tool returned (ToolOutput): for this turn's next model call, not stored.
    images: tuple[ToolImage, ...] = ()


class ToolExecutor:
    """Validates and runs calls against a registry, concurrently, each under a timeout."""

    def __init__(
        self, registry: ToolRegistry, *, timeout: float, max_result_chars: int = MAX_RESULT_CHARS
    ) -> None:
        self.registry = registry
        self.timeout = timeout
        self.max_result_chars = max_result_chars

    async def run(
        self,
        calls: Sequence[ToolCall],
        ctx: ToolContext,
        registry: ToolRegistry | None = None,
    ) -> list[ToolResult]:
        """Run all calls at once; results come back in the order of the calls. `registry`
        narrows what may be called in this step (a subset of the executor's)."""
        offered = registry if registry is not None else self.registry
        return list(await asyncio.gather(*(self.run_one(call, ctx, offered) for call in calls)))

    async def run_one(
        self, call: ToolCall, ctx: ToolContext, registry: ToolRegistry | None = None
    ) -> ToolResult:
        started = time.perf_counter()
        ok, output = await self._execute(call, ctx, registry or self.registry)
        log.info(
            "tool %s: %s status=%s duration=%.3fs",
            call.name or "?",
            ctx.label,
            "ok" if ok else "error",
            time.perf_counter() - started,
        )
        if isinstance(output, ToolOutput):
            content = self._cap(output.text or "Done.")
            return ToolResult(call=call, content=content, ok=ok, images=output.images)
        return ToolResult(call=call, content=self._cap(output), ok=ok)

    async def _execute(
        self, call: ToolCall, ctx: ToolContext, registry: ToolRegistry
    ) -> tuple[bool, str | ToolOutput]:
        if call.error is not None:
            return False, f"Error: {call.error}"
        tool = registry.get(call.name)
        if tool is None:
            available = ", ".join(registry.names()) or "none"
            return False, f"Unknown tool: {call.name or '(no name)'}. Available tools: {available}."
        try:
            raw = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return False, (
                f"Error: the arguments are not valid JSON ({exc.msg} at position {exc.pos}). "
                f"Call {tool.name} again with arguments matching this JSON schema: "
                f"{_schema(tool)}"
            )
        if not isinstance(raw, dict):
            return False, (
                f"Error: the arguments must be a JSON object, not {type(raw).__name__}. "
                f"Schema: {_schema(tool)}"
            )
        try:
            kwargs = tool.validate(raw)
        except ValidationError as exc:
            return False, (
                f"Error: invalid arguments for {tool.name}: {describe_validation_error(exc)}. "
                f"Schema: {_schema(tool)}"
            )
        return await self._invoke(tool, kwargs, ctx)

    async def _invoke(
        self, tool: Tool, kwargs: dict[str, Any], ctx: ToolContext
    ) -> tuple[bool, str | ToolOutput]:
        args = (ctx,) if tool.takes_context else ()
        timeout = tool.timeout if tool.timeout is not None else self.timeout
        try:
            async with asyncio.timeout(timeout) as deadline:
                result = await tool.func(*args, **kwargs)
        except TimeoutError:
            if deadline.expired():
                log.warning("tool %s: timed out after %.1fs", tool.name, timeout)
                return False, f"Error: {tool.name} did not finish within {timeout:g} s."
            return False, f"Error: {tool.name} timed out."
        except ToolError as exc:
            return False, f"Error: {exc}"
        except Exception as exc:
            # A bug in the tool, not in the turn: the model hears about it and can go on.
            # The message may hold user text, so only the type is logged at ERROR.
            log.error(
                "tool %s crashed: %s",
                tool.name,
                type(exc).__name__,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
            return False, f"Error: {type(exc).__name__}: {exc}"
        return True, result if isinstance(result, ToolOutput) else _to_text(result)

    def _cap(self, content: str) -> str:
        """The result within the limit: what is past it is cut, and the model told so."""
        if len(content) <= self.max_result_chars:
            return content
        cut = len(content) - self.max_result_chars
        return f"{content[: self.max_result_chars]}\n… [{cut} more characters cut]"


def _schema(tool: Tool) -> str:
    return json.dumps(tool.parameters, ensure_ascii=False)


def _to_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    if result is None:
        return "Done."
    return json.dumps(result, ensure_ascii=False, default=str)
