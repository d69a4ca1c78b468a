"""Tools the model can call within a turn: registry, executor, the two wire modes, built-ins."""

from membot.llm.tools.executor import ToolCall, ToolExecutor, ToolResult
from membot.llm.tools.modes import HermesMode, NativeMode, ToolMode, ToolModeName, make_mode
from membot.llm.tools.registry import Tool, ToolContext, ToolError, ToolRegistry, make_tool

__all__ = [
    "HermesMode",
    "NativeMode",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolExecutor",
    "ToolMode",
    "ToolModeName",
    "ToolRegistry",
    "ToolResult",
    "make_mode",
    "make_tool",
]
