"""A streamed completion put together: OpenAI's chunks (text pieces, tool-call pieces, the
usage in the last chunk) become the one LLMResponse a plain call returns, field for field."""

from __future__ import annotations

from typing import Any

from openai.types.chat import ChatCompletionChunk

from membot.llm.model import LLMResponse, Usage
from membot.llm.wire import usage_of


class Assembler:
    """Feed it every chunk in order (`add` returns the chunk's text); `response()` is the
    whole answer. Tool calls arrive in pieces keyed by their index: the first piece carries
    the id and the name, the later ones more of the arguments' JSON text."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.answered_by = ""
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.choices = 0  # chunks that carried a choice: none at all is no answer

    def add(self, chunk: ChatCompletionChunk) -> str:
        if chunk.model:
            self.answered_by = chunk.model
        if chunk.usage is not None:  # the last chunk, with stream_options.include_usage
            self.usage = usage_of(chunk.usage)
        piece = ""
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            self.choices += 1
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
            delta = choice.delta
            if delta.content:
                piece += delta.content
            for call in delta.tool_calls or ():
                slot = self.calls.setdefault(
                    call.index, {"id": "", "type": "function", "function": {"name": ""}}
                )
                if call.id:
                    slot["id"] = call.id
                if call.type:
                    slot["type"] = call.type
                function = call.function
                if function is not None:
                    if function.name:
                        slot["function"]["name"] = function.name
                    if function.arguments:
                        slot["function"]["arguments"] = (
                            slot["function"].get("arguments", "") + function.arguments
                        )
        if piece:
            self.text.append(piece)
        return piece

    def response(self) -> LLMResponse:
        calls = tuple(
            {**call, "function": {"arguments": "", **call["function"]}}
            for _, call in sorted(self.calls.items())
        )
        return LLMResponse(
            content="".join(self.text),
            tool_calls=calls,
            # OpenRouter reports the model that answered (a router resolves to a concrete one).
            model=self.answered_by or self.model,
            finish_reason=self.finish_reason,
            usage=self.usage,
        )
