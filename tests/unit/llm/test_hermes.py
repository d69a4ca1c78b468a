"""The Hermes `<tool_call>` text parser and the canonical <-> Hermes history rendering."""

from __future__ import annotations

import json

import pytest

from membot.llm.tools import hermes
from membot.llm.tools.executor import ToolCall


def args(call: ToolCall) -> object:
    return json.loads(call.arguments)


def test_plain_text_has_no_calls() -> None:
    text, calls = hermes.parse("Just an answer with {braces} and <b>html</b>.")
    assert calls == []
    assert text == "Just an answer with {braces} and <b>html</b>."


def test_one_call_with_text_before_and_after() -> None:
    text, calls = hermes.parse(
        'Let me check.\n<tool_call>\n{"name": "calculate", "arguments": {"expression": "2+2"}}'
        "\n</tool_call>\nOne moment."
    )
    assert [c.name for c in calls] == ["calculate"]
    assert args(calls[0]) == {"expression": "2+2"}
    assert calls[0].error is None
    assert text == "Let me check.\n\nOne moment."


def test_several_calls_in_order_with_unique_ids() -> None:
    text, calls = hermes.parse(
        '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>'
        '<tool_call>{"name": "b", "arguments": {"x": 2}}</tool_call>'
        '<tool_call>{"name": "c", "arguments": {}}</tool_call>'
    )
    assert [c.name for c in calls] == ["a", "b", "c"]
    assert [args(c) for c in calls] == [{"x": 1}, {"x": 2}, {}]
    assert len({c.id for c in calls}) == 3
    assert text == ""


def test_nested_braces_and_braces_and_tags_inside_strings() -> None:
    payload = {
        "name": "remember",
        "arguments": {"fact": 'likes "{curly}" braces } and </tool_call> tags', "n": {"d": [1]}},
    }
    _, calls = hermes.parse(f"<tool_call>{json.dumps(payload)}</tool_call> after")
    assert len(calls) == 1
    assert args(calls[0]) == payload["arguments"]


def test_code_fence_around_the_json() -> None:
    text, calls = hermes.parse(
        'Sure.\n<tool_call>\n```json\n{"name": "calculate", "arguments": {"expression": "1"}}'
        "\n```\n</tool_call>"
    )
    assert [c.name for c in calls] == ["calculate"]
    assert text == "Sure."


def test_missing_closing_tag_at_the_end() -> None:
    text, calls = hermes.parse(
        'Looking.\n<tool_call>{"name": "search_history", "arguments": {"query": "cat"}}'
    )
    assert [c.name for c in calls] == ["search_history"]
    assert args(calls[0]) == {"query": "cat"}
    assert text == "Looking."


def test_missing_closing_tag_before_the_next_call() -> None:
    _, calls = hermes.parse(
        '<tool_call>{"name": "a", "arguments": {}}\n'
        '<tool_call>{"name": "b", "arguments": {}}</tool_call>'
    )
    assert [c.name for c in calls] == ["a", "b"]


def test_parameters_instead_of_arguments() -> None:
    _, calls = hermes.parse('<tool_call>{"name": "a", "parameters": {"q": "x"}}</tool_call>')
    assert args(calls[0]) == {"q": "x"}


def test_arguments_given_as_a_json_string() -> None:
    _, calls = hermes.parse(
        '<tool_call>{"name": "a", "arguments": "{\\"q\\": \\"x\\"}"}</tool_call>'
    )
    assert args(calls[0]) == {"q": "x"}


def test_openai_style_function_wrapper() -> None:
    _, calls = hermes.parse(
        '<tool_call>{"function": {"name": "a", "arguments": {"q": 1}}}</tool_call>'
    )
    assert calls[0].name == "a"
    assert args(calls[0]) == {"q": 1}


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "calculate", "arguments": {"expression": "2+2"',  # truncated
        "{'name': 'calculate'}",  # Python, not JSON
        "calculate(2+2)",
    ],
)
def test_invalid_json_becomes_an_error_call(body: str) -> None:
    text, calls = hermes.parse(f"Hmm. <tool_call>{body}</tool_call> ok")
    assert len(calls) == 1
    assert calls[0].error is not None and "not valid JSON" in calls[0].error
    assert "<tool_call>" in calls[0].error  # the model is told the right format
    assert text == "Hmm.  ok"


def test_invalid_json_keeps_the_name_it_can_see() -> None:
    _, calls = hermes.parse('<tool_call>{"name": "calculate", "arguments": {oops}}</tool_call>')
    assert calls[0].name == "calculate"
    assert calls[0].error


def test_call_without_a_name_is_an_error() -> None:
    _, calls = hermes.parse('<tool_call>{"arguments": {}}</tool_call>')
    assert calls[0].error is not None and '"name"' in calls[0].error


def test_tags_never_survive_in_visible_text() -> None:
    text, _ = hermes.parse(
        'A <tool_response>{"name": "x", "content": "made up"}</tool_response> B '
        "</tool_call> C <TOOL_CALL>"
    )
    assert "tool_" not in text.lower()
    assert "made up" not in text


def test_system_section_lists_every_tool_schema() -> None:
    from membot.core.tools.builtin import builtin

    section = hermes.system_section(builtin)
    inside = section.split("<tools>\n")[1].split("</tools>")[0]
    schemas = json.loads(inside)
    assert [s["name"] for s in schemas] == builtin.names()
    assert all(s["parameters"]["type"] == "object" for s in schemas)
    assert "<tool_call>" in section


def test_render_turns_canonical_history_into_hermes_text() -> None:
    canonical = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "what is 2+2 and 3+3?"},
        {
            "role": "assistant",
            "content": "Counting.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "calculate", "arguments": '{"expression": "2+2"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "calculate", "arguments": '{"expression": "3+3"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "4"},
        {"role": "tool", "tool_call_id": "c2", "content": "6"},
        {"role": "assistant", "content": "4 and 6."},
    ]
    wire = hermes.render(canonical)
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "user", "assistant"]
    # The assistant's calls read back exactly as the parser understands them.
    text, calls = hermes.parse(wire[2]["content"])
    assert text == "Counting."
    assert [(c.name, args(c)) for c in calls] == [
        ("calculate", {"expression": "2+2"}),
        ("calculate", {"expression": "3+3"}),
    ]
    blocks = wire[3]["content"].split("</tool_response>")[:-1]
    responses = [json.loads(b.split("<tool_response>")[1]) for b in blocks]
    assert responses == [
        {"name": "calculate", "content": "4"},
        {"name": "calculate", "content": "6"},
    ]
    assert "tool_calls" not in wire[2] and all(m["role"] != "tool" for m in wire)
