"""Markdown -> Telegram parts: entities that are always valid, and a splitter that keeps order."""

from __future__ import annotations

from typing import Any

from membot.bot.render import Part, render, split_message


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def assert_valid(parts: list[Part], limit: int = 4096) -> None:
    for part in parts:
        assert part.text.strip(), "Telegram rejects empty messages"
        assert utf16(part.text) <= limit
        for e in part.entities:
            assert e["length"] > 0 and e["offset"] >= 0
            assert e["offset"] + e["length"] <= utf16(part.text), e


def entity_text(part: Part, entity: dict[str, Any]) -> str:
    raw = part.text.encode("utf-16-le")
    return raw[2 * entity["offset"] : 2 * (entity["offset"] + entity["length"])].decode("utf-16-le")


def test_markdown_becomes_entities_with_special_characters_intact() -> None:
    md = "Some **bold**, `a<b>&c_d`, and:\n\n```python\nif x < 1 and y > 2 & z_1:\n    pass\n```"
    [part] = render(md)
    types = {e["type"] for e in part.entities}
    assert {"bold", "code", "pre"} <= types
    code = next(e for e in part.entities if e["type"] == "code")
    assert entity_text(part, code) == "a<b>&c_d"
    pre = next(e for e in part.entities if e["type"] == "pre")
    assert pre.get("language") == "python"
    assert "if x < 1 and y > 2 & z_1:" in entity_text(part, pre)
    assert "**" not in part.text and "```" not in part.text
    assert_valid([part])


def test_short_text_is_one_part() -> None:
    assert render("hello") == [Part(text="hello", entities=[])]


def test_prefers_paragraph_boundaries() -> None:
    paragraphs = [f"Paragraph {i}: " + "word " * 150 for i in range(12)]
    text = "\n\n".join(paragraphs)
    parts = split_message(text, [], 4096)
    assert len(parts) > 1
    assert_valid(parts)
    for part in parts:
        assert part.text.startswith("Paragraph"), "each part starts at a paragraph"
    assert "\n\n".join(p.text for p in parts) == text


def test_falls_back_to_lines_then_spaces_then_hard_cut() -> None:
    lines = "\n".join("line " + "z" * 90 for _ in range(100))
    parts = split_message(lines, [], 4096)
    assert_valid(parts)
    assert all(p.text.startswith("line") for p in parts)
    words = " ".join(["word"] * 3000)
    parts = split_message(words, [], 4096)
    assert_valid(parts)
    assert all(not p.text.startswith(" ") and p.text.startswith("word") for p in parts)
    blob = "x" * 10_000
    parts = split_message(blob, [], 4096)
    assert [len(p.text) for p in parts] == [4096, 4096, 1808]


def test_code_block_split_is_closed_and_reopened() -> None:
    body = "\n".join(f"print({i})  # a < b & c > d" for i in range(400))
    parts = render(f"Intro\n\n```python\n{body}\n```\n\nOutro")
    assert len(parts) >= 3
    assert_valid(parts)
    pres = [e for p in parts for e in p.entities if e["type"] == "pre"]
    assert len(pres) >= 2, "the code block continues in the next part as its own block"
    assert all(e.get("language") == "python" for e in pres)
    joined = "".join(entity_text(p, e) + "\n" for p in parts for e in p.entities)
    assert all(f"print({i})" in joined for i in range(400))
    assert parts[0].text.startswith("Intro") and parts[-1].text.endswith("Outro")


def test_utf16_limits_count_emoji_twice() -> None:
    text = "🎉" * 3000  # 6000 UTF-16 units
    parts = split_message(text, [], 4096)
    assert_valid(parts)
    assert "".join(p.text for p in parts) == text
    assert [utf16(p.text) for p in parts] == [4096, 1904]


def test_entities_are_clipped_into_each_part() -> None:
    text = "a" * 5000
    parts = split_message(text, [{"type": "bold", "offset": 10, "length": 4990}], 4096)
    assert parts[0].entities == [{"type": "bold", "offset": 10, "length": 4086}]
    assert parts[1].entities == [{"type": "bold", "offset": 0, "length": 904}]


def test_blank_answer_renders_nothing() -> None:
    assert render("   \n\n ") == []


def test_ten_thousand_character_answer_keeps_all_text_in_order() -> None:
    sections = []
    for i in range(40):
        sections.append(
            f"## Part {i}\n\nThis is **bold {i}** with `inline_{i} <tag> & co`.\n\n"
            f'```html\n<div class="x_{i}">a & b > c</div>\n```\n'
        )
    md = "\n".join(sections)
    assert len(md) > 4096
    parts = render(md)
    assert_valid(parts)
    joined = "\n".join(p.text for p in parts)
    positions = [joined.index(f"Part {i}") for i in range(40)]
    assert positions == sorted(positions)
    assert all(f'<div class="x_{i}">a & b > c</div>' in joined for i in range(40))
