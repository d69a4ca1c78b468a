"""The prompt: system prompt, labelled summary, how to use history, window, new message."""

from __future__ import annotations

from membot.core.prompt import NO_HISTORY, SUMMARY_HEADER, WITH_HISTORY, PromptBuilder
from membot.memory.contract.models import Message


def u(text: str, name: str | None = None) -> Message:
    return Message(role="user", content=text, name=name)


def a(text: str) -> Message:
    return Message(role="assistant", content=text)


def test_first_message_without_history() -> None:
    msgs = PromptBuilder("You are X.").build(summary="", history=[], new=u("hi"))
    assert msgs[0]["role"] == "system"
    assert msgs[0]["content"].startswith("You are X.")
    assert NO_HISTORY in msgs[0]["content"] and SUMMARY_HEADER not in msgs[0]["content"]
    assert msgs[1:] == [{"role": "user", "content": "hi"}]


def test_summary_and_history_in_order() -> None:
    history = [u("q1"), a("a1"), u("q2"), a("a2")]
    msgs = PromptBuilder("SYS").build(summary="They like tea.", history=history, new=u("q3"))
    system = msgs[0]["content"]
    assert system.index("SYS") < system.index(SUMMARY_HEADER) < system.index("They like tea.")
    assert system.index("They like tea.") < system.index(WITH_HISTORY)
    assert [(m["role"], m["content"]) for m in msgs[1:]] == [
        ("user", "q1"),
        ("assistant", "a1"),
        ("user", "q2"),
        ("assistant", "a2"),
        ("user", "q3"),
    ]


def test_group_messages_carry_names() -> None:
    msgs = PromptBuilder("SYS").build(
        summary="", history=[u("hello", name="Ann")], new=u("hey", name="Bob"), group=True
    )
    assert msgs[1]["content"] == "Ann: hello"
    assert msgs[2]["content"] == "Bob: hey"
    assert "group chat" in msgs[0]["content"]


def test_window_never_starts_with_an_orphan_tool_result() -> None:
    history = [
        Message(role="tool", content="42", tool_call_id="c1"),
        a("The answer is 42."),
        u("thanks"),
    ]
    msgs = PromptBuilder("SYS").build(summary="", history=history, new=u("bye"))
    assert [m["role"] for m in msgs] == ["system", "assistant", "user", "user"]


def test_facts_and_tool_section_are_in_the_system_prompt() -> None:
    from membot.core.prompt import FACTS_HEADER

    msgs = PromptBuilder("SYS").build(
        summary="S",
        history=[],
        new=u("hi"),
        facts=["Name is Anna", "Likes tea"],
        extra_system=["TOOLS HERE"],
    )
    system = msgs[0]["content"]
    assert system.index("SYS") < system.index("TOOLS HERE") < system.index(FACTS_HEADER)
    assert f"{FACTS_HEADER}\n- Name is Anna\n- Likes tea" in system
    assert system.index(FACTS_HEADER) < system.index(SUMMARY_HEADER)


def test_window_cut_inside_a_tool_exchange_drops_the_orphans() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history = [
        Message(role="tool", content="r1", tool_call_id="c0"),
        Message(role="tool", content="r2", tool_call_id="c0b"),
        a("done"),
        u("q"),
        Message(role="assistant", content="", tool_calls=(call,)),
        Message(role="tool", content="r", tool_call_id="c1"),
        a("final"),
    ]
    msgs = PromptBuilder("SYS").build(summary="", history=history, new=u("next"))
    assert [m["role"] for m in msgs[1:]] == [
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert msgs[3]["tool_calls"] == [call] and msgs[4]["tool_call_id"] == "c1"


def test_a_tool_exchange_torn_inside_the_window_is_dropped() -> None:
    def call(call_id: str) -> dict[str, object]:
        return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}

    history = [
        u("q1"),
        # A crash tore this turn: the result of c2 never reached the disk.
        Message(role="assistant", content="Let me check.", tool_calls=(call("c1"), call("c2"))),
        Message(role="tool", content="r1", tool_call_id="c1"),
        u("q2"),
        # A complete exchange, results in another order, plus a stray result of no call.
        Message(role="assistant", content="", tool_calls=(call("c3"), call("c4"))),
        Message(role="tool", content="r4", tool_call_id="c4"),
        Message(role="tool", content="r3", tool_call_id="c3"),
        Message(role="tool", content="stray", tool_call_id="c9"),
        a("final"),
    ]
    msgs = PromptBuilder("SYS").build(summary="", history=history, new=u("next"))
    assert [(m["role"], m.get("tool_call_id"), "tool_calls" in m) for m in msgs[1:]] == [
        ("user", None, False),
        ("assistant", None, False),  # its words kept, the unanswered calls gone
        ("user", None, False),
        ("assistant", None, True),
        ("tool", "c3", False),
        ("tool", "c4", False),
        ("assistant", None, False),
        ("user", None, False),
    ]
    assert msgs[2]["content"] == "Let me check."


def test_a_sessions_own_system_prompt_replaces_the_default_only() -> None:
    builder = PromptBuilder("DEFAULT PROMPT")
    system = builder.build_system(
        summary="They like tea.",
        has_history=True,
        facts=["Name is Ann"],
        extra_system=["TOOLS SECTION"],
        system_prompt="  Answer in JSON.  ",
    )["content"]
    assert system.startswith("Answer in JSON.\n\n")
    assert "DEFAULT PROMPT" not in system
    for section in ("TOOLS SECTION", "Name is Ann", SUMMARY_HEADER, WITH_HISTORY):
        assert section in system
    # A blank one is no prompt at all: the default stays.
    blank = builder.build_system(summary="", has_history=False, system_prompt=" \n ")["content"]
    assert blank.startswith("DEFAULT PROMPT")
