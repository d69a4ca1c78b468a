"""How tools reach the model: natively (`tools` / `tool_calls`) or as Hermes text.

The agent stores and reasons about tool use in one canonical shape (OpenAI's); a mode only
translates at the edge: what to add to the system prompt, what to send, how to read a reply.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import membot.llm.tools.hermes as hermes
from membot.llm.model import ChatMessage, LLMResponse, ModelRequest
from membot.llm.tools.executor import ToolCall
from membot.llm.tools.registry import ToolRegistry

ToolModeName = Literal["native", "hermes"]


class ToolMode(Protocol):
    name: ToolModeName

    def system_section(self, registry: ToolRegistry) -> str | None:
        """Text for the system prompt, if the mode describes tools there."""
        ...

    def request(
        self, messages: Sequence[ChatMessage], registry: ToolRegistry, *, final: bool
    ) -> ModelRequest:
        """The request for canonical `messages` (with the default options: the caller adds
        its own); `final` asks for an answer without tools."""
        ...

    def parse(self, response: LLMResponse) -> tuple[str, list[ToolCall]]:
        """The text for the user (no tool tags) and the calls, in order."""
        ...


class NativeMode:
    name: ToolModeName = "native"

    def system_section(self, registry: ToolRegistry) -> str | None:
        return None

    def request(
        self, messages: Sequence[ChatMessage], registry: ToolRegistry, *, final: bool
    ) -> ModelRequest:
        if not registry:
            # Tools are off (TOOLS=) but the history may hold earlier tool use; providers
            # refuse `tool_calls` without declared tools, so that part is shown as text.
            return ModelRequest(hermes.render(messages))
        tools = [tool.openai_schema() for tool in registry]
        # The history holds tool calls, so the tools stay declared; "none" forbids new ones.
        return ModelRequest(list(messages), tools=tools, tool_choice="none" if final else None)

    def parse(self, response: LLMResponse) -> tuple[str, list[ToolCall]]:
        if response.tool_calls:
            calls = [ToolCall.from_openai(tc) for tc in response.tool_calls]
            return hermes.clean(response.content), calls
        # Some models behind OpenRouter answer a `tools` request with Hermes text anyway.
        return hermes.parse(response.content)


class HermesMode:
    name: ToolModeName = "hermes"

    def system_section(self, registry: ToolRegistry) -> str | None:
        return hermes.system_section(registry) if registry else None

    def request(
        self, messages: Sequence[ChatMessage], registry: ToolRegistry, *, final: bool
    ) -> ModelRequest:
        wire = hermes.render(messages)
        if final and registry:
            last = wire[-1]
            if last.get("role") == "user":
                wire[-1] = {
                    **last,
                    "content": f"{last.get('content') or ''}\n\n{hermes.FINAL_NOTE}",
                }
            else:
                wire.append({"role": "user", "content": hermes.FINAL_NOTE})
        return ModelRequest(wire)

    def parse(self, response: LLMResponse) -> tuple[str, list[ToolCall]]:
        return hermes.parse(response.content)


def make_mode(name: ToolModeName) -> ToolMode:
    return HermesMode() if name == "hermes" else NativeMode()
