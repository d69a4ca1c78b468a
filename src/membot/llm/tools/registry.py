"""Tools are typed async functions; their JSON schema comes from the signature and docstring.

    registry = ToolRegistry()

    @registry.tool
    async def remember(ctx: ToolContext, fact: str) -> str:
        \"\"\"Keep a fact about the user for all later conversations.

        Args:
            fact: The fact, as one short sentence.
        \"\"\"

A first parameter annotated `ToolContext` (or a subclass) receives the call's context and is
not part of the schema. Every other parameter becomes a property, validated by pydantic before
the call. The machinery knows nothing of what the context holds: an application subclasses
it with what its own tools need (membot.core.tools.context.TurnContext).

A tool from elsewhere (an MCP server's, membot.mcp) comes with its own JSON schema and checks
its own arguments: `schema_tool` makes one; it may return a `ToolOutput`, text with images.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from membot.errors import MembotError


class ToolError(MembotError):
    """An expected failure whose message goes back to the model ("Error: <message>").

    Raise it from a tool for anything the model can fix: a bad timezone, nothing to forget.
    Any other exception is a bug in the tool; it also goes back to the model, and is logged.
    """


class ToolContext:
    """What the tools of one call may know: the base the application's context derives from.
    The machinery reads only `label`, to say in its logs whose call it ran."""

    __slots__ = ()

    @property
    def label(self) -> str:
        return "-"


@dataclass(frozen=True, slots=True)
class ToolImage:
    """An image a tool returned: shown to a model that sees images, in the turn it came in."""

    data: bytes
    mime: str


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool may return besides a string: text for the model, and images."""

    text: str
    images: tuple[ToolImage, ...] = ()


ToolFunc = Callable[..., Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    func: ToolFunc
    # None: the arguments go to `func` as the model wrote them (a JSON object), checked by
    # whoever runs the tool (an MCP server checks its own).
    arguments: type[BaseModel] | None
    takes_context: bool
    # The JSON schema of the arguments, made once: pydantic takes ~0.4 ms per tool to build
    # it, and every request of a turn declares every tool.
    parameters: dict[str, Any]
    schema: dict[str, Any]
    # Seconds a call may take; None: the executor's (TOOL_TIMEOUT).
    timeout: float | None = None
    # Its results come from outside the application (an MCP server's): data for the model,
    # which may carry words meant to steer it. The application decides what that bars.
    outside: bool = False

    def openai_schema(self) -> dict[str, Any]:
        return self.schema

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Checked, coerced keyword arguments; raises pydantic's ValidationError."""
        if self.arguments is None:
            return dict(arguments)
        return dict(self.arguments.model_validate(arguments))


class ToolRegistry:
    """The tools available to the agent, by name, in registration order."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def tool(self, func: ToolFunc) -> ToolFunc:
        """Decorator: register `func` under its own name."""
        self.add(make_tool(func))
        return func

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        wanted = set(names)
        unknown = wanted - set(self._tools)
        if unknown:
            raise KeyError(", ".join(sorted(unknown)))
        return ToolRegistry(t for t in self._tools.values() if t.name in wanted)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __bool__(self) -> bool:
        return bool(self._tools)


def make_tool(func: ToolFunc) -> Tool:
    if not inspect.iscoroutinefunction(func):
        raise TypeError(f"tool {func.__name__!r} must be an async function")
    # include_extras keeps Annotated[..., Field(...)] constraints for the schema.
    hints = get_type_hints(func, include_extras=True)
    description, arg_docs = parse_docstring(inspect.getdoc(func) or "")
    if not description:
        raise TypeError(f"tool {func.__name__!r} needs a docstring: it is the model's manual")
    params = list(inspect.signature(func).parameters.values())
    first = hints.get(params[0].name) if params else None
    takes_context = isinstance(first, type) and issubclass(first, ToolContext)
    if takes_context:
        params = params[1:]
    fields: dict[str, Any] = {}
    for param in params:
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise TypeError(f"tool {func.__name__!r}: *args and **kwargs are not supported")
        if param.name not in hints:
            raise TypeError(f"tool {func.__name__!r}: parameter {param.name!r} needs a type")
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (
            hints[param.name],
            Field(default, description=arg_docs.get(param.name)),
        )
    model = create_model(
        f"{func.__name__}_arguments",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )
    parameters = _clean_schema(model.model_json_schema())
    return Tool(
        name=func.__name__,
        description=description,
        func=func,
        arguments=model,
        takes_context=takes_context,
        parameters=parameters,
        schema={
            "type": "function",
            "function": {
                "name": func.__name__,
                "description": description,
                "parameters": parameters,
            },
        },
    )


def schema_tool(
    name: str,
    description: str,
    parameters: dict[str, Any],
    func: ToolFunc,
    *,
    timeout: float | None = None,
    outside: bool = False,
) -> Tool:
    """A tool whose schema is given (`parameters`, a JSON schema of an object, in a form
    providers take) and whose `func` takes the arguments as keywords, unchecked."""
    return Tool(
        name=name,
        description=description,
        func=func,
        arguments=None,
        takes_context=False,
        parameters=parameters,
        schema={
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters},
        },
        timeout=timeout,
        outside=outside,
    )


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Example|Examples):\s*$")
_ARG = re.compile(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Google-style docstring -> (description, {argument: description}).

    We write our tools' docstrings ourselves in this one style, so a dozen lines do it.
    """
    description: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        if match := _SECTION.match(line):
            section, current = match.group(1), None
            continue
        if section is None:
            description.append(line)
        elif section in ("Args", "Arguments", "Parameters"):
            if match := _ARG.match(line):
                current = match.group(1)
                args[current] = match.group(2).strip()
            elif current and line.strip():
                args[current] = f"{args[current]} {line.strip()}"
    # Docstring lines are wrapped for the source; the model gets paragraphs.
    text = re.sub(r"(?<!\n)\n(?!\n)", " ", "\n".join(description).strip())
    return text, args


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    cleaned: dict[str, Any] = strip(schema)
    cleaned.setdefault("properties", {})
    return cleaned


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)
