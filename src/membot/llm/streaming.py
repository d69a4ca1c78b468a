"""A streamed completion put together: OpenAI's chunks (text pieces, tool-call pieces, the
usage in the last chunk) become the one LLMResponse a plain call returns, field for field.

Chunks are read as the JSON they are, not as the SDK's pydantic models: building a model per
chunk cost ~0.6 ms, more than everything else a streamed piece costs membot together, and a
long answer is a few hundred chunks. Only the usage (once per stream) becomes one."""

from __future__ import annotations

from typing import Any

from openai.types import CompletionUsage

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

    def add(self, chunk: object) -> str:
        if not isinstance(chunk, dict):
            return ""
        model = chunk.get("model")
        if isinstance(model, str) and model:
            self.answered_by = model
        usage = chunk.get("usage")
        if isinstance(usage, dict):  # the last chunk, with stream_options.include_usage
            self.usage = usage_of(CompletionUsage.construct(**usage))
        piece = ""
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            self.choices += 1
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self.finish_reason = finish
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            content = delta.get("content")
            if isinstance(content, str):
                piece += content
            for call in delta.get("tool_calls") or ():
                if isinstance(call, dict):
                    self._call_piece(call)
        if piece:
            self.text.append(piece)
        return piece

    def _call_piece(self, call: dict[str, Any]) -> None:
        index = call.get("index", 0)
        slot = self.calls.setdefault(
            index if isinstance(index, int) else 0,
            {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
        )
        for key in ("id", "type"):
            value = call.get(key)
            if isinstance(value, str) and value:
                slot[key] = value
        function = call.get("function")
        if isinstance(function, dict):
            name = function.get("name")
            if isinstance(name, str) and name:
                slot["function"]["name"] = name
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                slot["function"]["arguments"] += arguments

    def response(self) -> LLMResponse:
        return LLMResponse(
            content="".join(self.text),
            tool_calls=tuple(call for _, call in sorted(self.calls.items())),
            # OpenRouter reports the model that answered (a router resolves to a concrete one).
            model=self.answered_by or self.model,
            finish_reason=self.finish_reason,
            usage=self.usage,
        )
