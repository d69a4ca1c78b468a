"""Tools the model can call within a turn: the registry (registry.py), the executor
(executor.py), the two wire modes (modes.py: native, or Hermes text, hermes.py) and what of a
reply may be shown while a tool call is written (visible.py). The built-in tools themselves
are the core's (membot.core.tools)."""

from membot.llm.tools.executor import ToolCall, ToolExecutor, ToolResult
from membot.llm.tools.modes import HermesMode, NativeMode, ToolMode, ToolModeName, make_mode
from membot.llm.tools.registry import (
    Tool,
    ToolContext,
    ToolError,
    ToolImage,
    ToolOutput,
    ToolRegistry,
    make_tool,
    schema_tool,
)

__all__ = [
    "HermesMode",
    "NativeMode",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolExecutor",
    "ToolImage",
    "ToolMode",
    "ToolModeName",
    "ToolOutput",
    "ToolRegistry",
    "ToolResult",
    "make_mode",
    "make_tool",
    "schema_tool",
]
