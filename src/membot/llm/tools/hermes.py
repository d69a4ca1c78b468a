"""Hermes-style tool use in plain text, for models without native function calling.

The tools are described in the system prompt inside `<tools>[...]</tools>`; the model calls one
by writing `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; results go back in a
user message of `<tool_response>...</tool_response>` blocks.

Models write this format loosely, so the parser is lenient where intent is clear (a code
fence around the JSON, a missing closing tag at the end, `parameters` for `arguments`,
arguments as a JSON string) and strict where it is not: JSON it cannot read becomes a call
with an error, which goes back to the model instead of being guessed at.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from membot.llm.tools.executor import ToolCall, new_call_id
from membot.llm.tools.registry import Tool

if TYPE_CHECKING:
    from membot.llm.model import ChatMessage

OPEN = "<tool_call>"
CLOSE = "</tool_call>"

SYSTEM_TEMPLATE = """\
You can call tools (functions) to help with the user's message. Their signatures are \
JSON schemas inside <tools></tools>:
<tools>
{tools}
</tools>
To call a tool, write a JSON object with its name and arguments inside <tool_call></tool_call> \
tags, exactly like this:
<tool_call>
{{"name": "<tool name>", "arguments": {{<arguments as a JSON object>}}}}
</tool_call>
You may write a short sentence for the user before the call (it is shown at once), and you \
may make several calls in one message. Then stop and wait: the results come back inside \
<tool_response></tool_response> tags. Never write <tool_response> yourself. When no tool is \
needed, just answer in plain text without any tags."""

FINAL_NOTE = (
    "You have used all the tool calls allowed for this message. Do not call any more tools: "
    "answer the user now in plain text, using what you already have."
)

# Tags that must never reach the user, even when a model invents or half-writes them.
_STRAY_TAGS = re.compile(r"</?tool_(?:call|response)>|</?tools>", re.IGNORECASE)
_RESPONSE_BLOCK = re.compile(r"<tool_response>.*?(?:</tool_response>|$)", re.DOTALL | re.I)
_OPEN_TAG = re.compile(re.escape(OPEN), re.IGNORECASE)
_CLOSE_TAG = re.compile(re.escape(CLOSE), re.IGNORECASE)
_FENCE_OPEN = re.compile(r"\s*```[a-zA-Z]*\s*")
_FENCE_CLOSE = re.compile(r"\s*```")
_NAME_GUESS = re.compile(r'"name"\s*:\s*"([^"\\]{1,100})"')
_decoder = json.JSONDecoder()


def system_section(tools: Iterable[Tool]) -> str:
    schemas = [
        {"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools
    ]
    return SYSTEM_TEMPLATE.format(tools=json.dumps(schemas, ensure_ascii=False, indent=1))


def parse(text: str) -> tuple[str, list[ToolCall]]:
    """Split a reply into the text for the user and the tool calls, in order of appearance."""
    visible: list[str] = []
    calls: list[ToolCall] = []
    pos = 0
    while match := _OPEN_TAG.search(text, pos):
        visible.append(text[pos : match.start()])
        call, pos = _read_call(text, match.end())
        calls.append(call)
    visible.append(text[pos:])
    return clean("".join(visible)), calls


def clean(text: str) -> str:
    """Text fit for the user: no tool blocks or tags, no blank lines they leave behind."""
    text = _RESPONSE_BLOCK.sub("", text)
    text = _STRAY_TAGS.sub("", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _find(tag: re.Pattern[str], text: str, pos: int) -> int:
    match = tag.search(text, pos)
    return match.start() if match else -1


def _read_call(text: str, body_start: int) -> tuple[ToolCall, int]:
    """Read one call starting right after `<tool_call>`; return it and where its block ends.

    The block ends at the closing tag, unless another `<tool_call>` (or the end of the text)
    comes first: then the model forgot the tag, and the JSON object itself ends the block.
    """
    fence = _FENCE_OPEN.match(text, body_start)
    json_start = fence.end() if fence else body_start
    while json_start < len(text) and text[json_start].isspace():
        json_start += 1
    try:
        obj, json_end = _decoder.raw_decode(text, json_start)
    except json.JSONDecodeError as exc:
        end, block_end = _block_end(text, body_start)
        raw = text[body_start:end].strip()
        return _broken(raw, f"the tool call is not valid JSON ({exc.msg})"), block_end
    close = _find(_CLOSE_TAG, text, json_end)
    next_open = _find(_OPEN_TAG, text, json_end)
    if close != -1 and (next_open == -1 or close < next_open):
        block_end = close + len(CLOSE)
    else:
        block_end = json_end
        if fence and (after := _FENCE_CLOSE.match(text, json_end)):
            block_end = after.end()
    return _to_call(obj, text[json_start:json_end]), block_end


def _block_end(text: str, body_start: int) -> tuple[int, int]:
    """(end of the body, end of the block) for a call whose JSON could not be read."""
    close = _find(_CLOSE_TAG, text, body_start)
    next_open = _find(_OPEN_TAG, text, body_start)
    if close != -1 and (next_open == -1 or close < next_open):
        return close, close + len(CLOSE)
    end = len(text) if next_open == -1 else next_open
    return end, end


def _to_call(obj: Any, raw: str) -> ToolCall:
    if not isinstance(obj, dict):
        return _broken(raw, "the tool call must be a JSON object with name and arguments")
    if isinstance(obj.get("function"), dict):  # {"function": {"name": ..., "arguments": ...}}
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return _broken(raw, 'the tool call has no "name"')
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if arguments is None:
        arguments = {}
    # A string is passed through as written: it is either JSON (fine) or an error to report.
    raw_args = (
        arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    )
    return ToolCall(id=new_call_id(), name=name.strip(), arguments=raw_args)


def _broken(raw: str, error: str) -> ToolCall:
    guess = _NAME_GUESS.search(raw)
    example = '<tool_call>{"name": "...", "arguments": {...}}</tool_call>'
    return ToolCall(
        id=new_call_id(),
        # Stored in the history like any call, so it needs a name a provider accepts.
        name=guess.group(1) if guess else "invalid_tool_call",
        arguments=raw,
        error=f"{error}. Write the call again as {example}",
    )


def render(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The canonical (OpenAI-shaped) conversation as a Hermes model must see it.

    Assistant `tool_calls` become `<tool_call>` text again, and each run of `tool` messages
    becomes one user message of `<tool_response>` blocks, so a history made in native mode
    stays readable after a switch to hermes mode, and vice versa.
    """
    out: list[ChatMessage] = []
    names: dict[str, str] = {}
    responses: list[str] = []

    def flush() -> None:
        if responses:
            out.append({"role": "user", "content": "\n".join(responses)})
            responses.clear()

    for message in messages:
        role = message.get("role")
        if role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            payload = {"name": names.get(call_id, ""), "content": message.get("content") or ""}
            responses.append(
                f"<tool_response>\n{json.dumps(payload, ensure_ascii=False)}\n</tool_response>"
            )
            continue
        flush()
        if role == "assistant" and message.get("tool_calls"):
            blocks = []
            for data in message["tool_calls"]:
                call = ToolCall.from_openai(data)
                names[call.id] = call.name
                blocks.append(f"{OPEN}\n{_call_json(call)}\n{CLOSE}")
            text = (message.get("content") or "").strip()
            out.append({"role": "assistant", "content": "\n".join([text, *blocks]).strip()})
        else:
            out.append(message)
    flush()
    return out


def _call_json(call: ToolCall) -> str:
    try:
        arguments: Any = json.loads(call.arguments)
    except json.JSONDecodeError:
        arguments = call.arguments  # shown as the model wrote it, so it sees its mistake
    return json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
