"""The Telegram splitter (bot/render.py): parts Telegram accepts, cut where a reader expects.

Telegram measures text and entity offsets in UTF-16 code units, and so does the splitter;
code blocks are entities (never Markdown fences), so a block split in two shows up as two
`pre` entities, one closing the first part and one opening the next. test_render.py covers
the basic cases; these pin down the exact properties, over generated inputs too.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import telegramify_markdown

from membot.bot.render import TELEGRAM_LIMIT, Part, render, split_message
from tests.fakes import utf16_len
from tests.fakes.telegram import validate_entities


def units(text: str) -> bytes:
    return text.encode("utf-16-le")


def entity_text(text: str, entity: dict[str, Any]) -> str:
    raw = units(text)
    return raw[2 * entity["offset"] : 2 * (entity["offset"] + entity["length"])].decode("utf-16-le")


def locate(text: str, parts: list[Part]) -> list[int]:
    """Where each part starts in `text`; fails unless the parts are `text` in order with only
    whitespace dropped at the cuts."""
    starts = []
    pos = 0
    for part in parts:
        while not text.startswith(part.text, pos):
            assert pos < len(text) and text[pos].isspace(), (
                f"text lost before part {len(starts)}: {text[pos : pos + 40]!r}"
            )
            pos += 1
        starts.append(pos)
        pos += len(part.text)
    assert not text[pos:].strip(), f"text lost at the end: {text[pos:]!r}"
    return starts


def assert_telegram_accepts(parts: list[Part], limit: int = TELEGRAM_LIMIT) -> None:
    for part in parts:
        assert part.text.strip()
        assert utf16_len(part.text) <= limit
        # The fake Telegram's own check: in bounds, and no boundary inside a surrogate pair.
        validate_entities(part.text, part.entities)


PLAIN_PIECES = ["word", " ", " ", "\n", "\n\n", "🎉", "日本", "é", "x" * 25, "👍🏽"]
MARKDOWN_PIECES = [
    "plain words ",
    "**bold 🎉 text** ",
    "_italic_ ",
    "`co de` ",
    "\n",
    "\n\n",
    "日本語 ",
    "🎉",
    "[a link](https://example.com/x) ",
    "\n```python\nx = 1\ny = 2  # 🎉\n```\n",
    "- item\n",
    "x" * 30,
]


@pytest.mark.parametrize("seed", range(4))
def test_generated_text_fits_and_loses_only_whitespace_at_cuts(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(400):
        text = "".join(rng.choice(PLAIN_PIECES) for _ in range(rng.randint(1, 150)))
        limit = rng.randint(2, 80)
        parts = split_message(text, [], limit)
        assert_telegram_accepts(parts, limit)
        locate(text, parts)


@pytest.mark.parametrize("seed", range(4))
def test_entities_stay_in_their_part_and_map_back_exactly(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        markdown = "".join(rng.choice(MARKDOWN_PIECES) for _ in range(rng.randint(1, 60)))
        text, converted = telegramify_markdown.convert(markdown)
        entities = [e.to_dict() for e in converted]
        limit = rng.randint(10, 120)
        parts = split_message(text, entities, limit)
        assert_telegram_accepts(parts, limit)
        for part, start in zip(parts, locate(text, parts), strict=True):
            lo = utf16_len(text[:start])
            hi = lo + utf16_len(part.text)
            # What the original formatting covers inside this part, in part coordinates.
            expected = []
            for e in entities:
                a, b = max(e["offset"], lo), min(e["offset"] + e["length"], hi)
                if a < b:
                    expected.append({**e, "offset": a - lo, "length": b - a})
            assert sorted(part.entities, key=repr) == sorted(expected, key=repr)


def test_full_size_parts_are_measured_in_utf16_units() -> None:
    # 4200 units of emoji in one unbreakable line, behind 4095 units of ASCII: an emoji is
    # two units, so the first part must stop at 4095, not split the pair at 4096.
    text = "a" * 4095 + "🎉" * 2100 + "b" * 10
    parts = split_message(text, [], TELEGRAM_LIMIT)
    assert_telegram_accepts(parts)
    assert [utf16_len(p.text) for p in parts] == [4095, 4096, 114]
    assert parts[0].text == "a" * 4095
    assert "".join(p.text for p in parts) == text


def test_bold_emoji_split_keeps_the_entity_on_whole_characters() -> None:
    parts = render("**" + "🎉" * 2100 + "**")
    assert_telegram_accepts(parts)
    assert [p.entities for p in parts] == [
        [{"type": "bold", "offset": 0, "length": 4096}],
        [{"type": "bold", "offset": 0, "length": 104}],
    ]
    assert "".join(p.text for p in parts) == "🎉" * 2100


def test_a_paragraph_break_wins_over_a_later_line_break() -> None:
    first = "First paragraph. " * 150  # ~2550 units
    lines = "\n".join(f"line {i:03d} " + "z" * 40 for i in range(60))
    text = f"{first.strip()}\n\n{lines}"
    parts = split_message(text, [], TELEGRAM_LIMIT)
    assert_telegram_accepts(parts)
    assert parts[0].text == first.strip()
    assert parts[1].text.startswith("line 000 ")


def test_a_line_break_wins_over_a_later_space() -> None:
    first = "some words " * 200  # ~2200 units on one line
    text = f"{first.strip()}\n" + "more words " * 300
    parts = split_message(text, [], TELEGRAM_LIMIT)
    assert_telegram_accepts(parts)
    assert parts[0].text == first.strip()
    assert parts[1].text.startswith("more words")


def test_a_code_block_that_fits_the_next_part_is_not_cut() -> None:
    intro = "Intro text. " * 125  # 1500 units
    code = "\n".join(f"value_{i} = {i} * 2" for i in range(200))  # ~3500 units
    parts = render(f"{intro}\n\n```python\n{code}\n```\n\nThat is all.")
    assert_telegram_accepts(parts)
    pres = [(n, e) for n, p in enumerate(parts) for e in p.entities if e["type"] == "pre"]
    [(n, pre)] = pres
    assert entity_text(parts[n].text, pre).rstrip("\n") == code
    assert pre["language"] == "python"
    assert parts[0].text == intro.strip()


def test_a_long_code_block_is_closed_at_the_cut_and_reopened_with_its_language() -> None:
    code_lines = [f"print('row {i:04d}', a < b and c > d)  # 🎉 & more" for i in range(300)]
    code = "\n".join(code_lines)  # ~13,000 units: at least four parts
    parts = render(f"Here is the script:\n\n```python\n{code}\n```\n\nRun it twice.")
    assert len(parts) >= 4
    assert_telegram_accepts(parts)
    pres: list[dict[str, Any] | None] = []
    for part in parts:
        found = [e for e in part.entities if e["type"] == "pre"]
        assert len(found) <= 1
        pres.append(found[0] if found else None)
    with_code = [n for n, pre in enumerate(pres) if pre is not None]
    assert with_code == list(range(with_code[0], with_code[-1] + 1)), "one block, no gaps"
    for n in with_code[:-1]:
        this, following = pres[n], pres[n + 1]
        assert this is not None and following is not None
        assert this["offset"] + this["length"] == utf16_len(parts[n].text), "closed at the cut"
        assert following["offset"] == 0, "reopened at the start of the next part"
    blocks = []
    for n in with_code:
        pre = pres[n]
        assert pre is not None and pre["language"] == "python"
        blocks.append(entity_text(parts[n].text, pre).strip("\n"))
    assert len(blocks) >= 4
    # Every line of code exactly once, in order, none cut in the middle.
    assert [line for block in blocks for line in block.split("\n")] == code_lines
    assert parts[0].text.startswith("Here is the script:")
    assert parts[-1].text.endswith("Run it twice.")
