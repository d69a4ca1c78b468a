"""What of a reply may be shown while it is written (llm/tools/visible.py)."""

from __future__ import annotations

import pytest

from membot.llm.tools.visible import VisibleText


def shown(*pieces: str) -> list[str]:
    visible = VisibleText()
    return [visible.feed(piece) for piece in pieces]


def test_plain_text_adds_up_without_the_blank_ends() -> None:
    assert "".join(shown("  \n Hel", "lo, ", "world.\n\n")) == "Hello, world."


@pytest.mark.parametrize("cut", range(1, 12))
def test_a_tool_call_split_anywhere_is_never_shown(cut: int) -> None:
    text = 'Let me check. <TOOL_CALL>{"name": "calc"}</tool_call> and more'
    pieces = shown(text[: 14 + cut], text[14 + cut :])
    assert "".join(pieces) == "Let me check."


def test_a_lone_angle_bracket_is_held_then_shown() -> None:
    assert shown("a <", "b") == ["a", " <b"]


@pytest.mark.parametrize("tag", ["<tool_response>", "</tool_call>", "<tools>"])
def test_any_tool_tag_stops_the_text(tag: str) -> None:
    assert "".join(shown("Before ", tag, " after")) == "Before"
