"""Telegram's MarkdownV2 parse mode, modelled on TDLib's parse_markdown_v2."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fakes.telegram.markup.text import (
    ParseError,
    byte_offset,
    plain_slice,
    sort_entities,
    u16,
)

_MDV2_RESERVED = frozenset("_*[]()~`>#+-=|{}.!")


_MDV2_NAMES = {
    "bold": "Bold",
    "italic": "Italic",
    "underline": "Underline",
    "strikethrough": "Strikethrough",
    "spoiler": "Spoiler",
    "code": "Code",
    "pre": "Pre",
    "text_link": "TextUrl",
    "custom_emoji": "CustomEmoji",
}


@dataclass(slots=True)
class _OpenMd:
    kind: str
    offset: int
    index: int
    language: str | None = None


def parse_markdown_v2(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse MarkdownV2 into (plain text, entities); raises ParseError like Telegram.

    Follows TDLib's algorithm: any ASCII character may be escaped with a backslash; outside
    code/pre every character of ``_*[]()~`>#+-=|{}.!`` must be escaped unless it opens or
    closes an entity; ``>`` at the start of a line (and ``**>`` for expandable quotes) forms
    block quotations.
    """
    out: list[str] = []
    offset = 0
    stack: list[_OpenMd] = []
    entities: list[dict[str, Any]] = []
    quote: tuple[int, bool] | None = None  # (start offset, expandable)
    i = 0
    n = len(text)

    def reserved_error(index: int) -> ParseError:
        return ParseError(
            f"Character '{text[index]}' is reserved and must be escaped with the preceding '\\'"
        )

    def close_quote(end: int) -> None:
        nonlocal quote
        if quote is not None and end > quote[0]:
            kind = "expandable_blockquote" if quote[1] else "blockquote"
            entities.append({"type": kind, "offset": quote[0], "length": end - quote[0]})
        quote = None

    while i < n:
        char = text[i]
        in_code = bool(stack) and stack[-1].kind in ("code", "pre")
        if not in_code and (i == 0 or text[i - 1] == "\n"):
            if text.startswith("**>", i) or char == ">":
                if quote is None:
                    quote = (offset, text.startswith("**>", i))
                i += 3 if text.startswith("**>", i) else 1
                continue
            if quote is not None:
                close_quote(offset - 1)  # the quote ended before the previous newline
        if char == "\\" and i + 1 < n and 0 < ord(text[i + 1]) <= 126:
            out.append(text[i + 1])
            offset += 1
            i += 2
            continue
        if char not in ("`" if in_code else _MDV2_RESERVED):
            out.append(char)
            offset += u16(char)
            i += 1
            continue
        top = stack[-1].kind if stack else None
        closes = (
            (top == "bold" and char == "*")
            or (top == "italic" and char == "_" and not text.startswith("__", i))
            or (top == "underline" and text.startswith("__", i))
            or (top == "strikethrough" and char == "~")
            or (top == "spoiler" and text.startswith("||", i))
            or (top == "code" and char == "`")
            or (top == "pre" and text.startswith("```", i))
            or (top in ("text_link", "custom_emoji") and char == "]")
        )
        if not closes:
            if (
                quote is not None
                and quote[1]
                and text.startswith("||", i)
                and (i + 2 == n or text[i + 2] == "\n")
            ):
                i += 2  # end marker of an expandable block quotation
                continue
            i = _md_open(text, i, offset, stack, reserved_error)
            continue
        entry = stack.pop()
        length = offset - entry.offset
        entity: dict[str, Any] = {"type": entry.kind, "offset": entry.offset, "length": length}
        if entry.kind in ("underline", "spoiler"):
            i += 2
        elif entry.kind == "pre":
            i += 3
            if entry.language:
                entity["language"] = entry.language
        elif entry.kind in ("text_link", "custom_emoji"):
            i += 1
            if i < n and text[i] == "(":
                url, i = md_url(text, i + 1)
            elif entry.kind == "custom_emoji":
                raise ParseError("Custom emoji entity must contain a tg://emoji URL")
            else:
                # "[http://x]" without a target: Telegram uses the text itself as the URL.
                url = plain_slice(out, entry.offset, offset)
            if entry.kind == "custom_emoji":
                emoji_id = url.removeprefix("tg://emoji?id=")
                if emoji_id == url or not emoji_id:
                    raise ParseError("Custom emoji URL must have the form tg://emoji?id=...")
                entity["custom_emoji_id"] = emoji_id
            elif not url:
                length = 0  # no URL: Telegram keeps the text and drops the entity
            else:
                entity["url"] = url
        else:
            i += 1
        if length > 0:
            entities.append(entity)
    if stack:
        entry = stack[-1]
        raise ParseError(
            f"Can't find end of {_MDV2_NAMES[entry.kind]} entity at byte offset "
            f"{byte_offset(text, entry.index)}"
        )
    close_quote(offset)
    return "".join(out), sort_entities(entities)


def _md_open(
    text: str,
    i: int,
    offset: int,
    stack: list[_OpenMd],
    reserved_error: Callable[[int], ParseError],
) -> int:
    """Open the MarkdownV2 entity that starts at ``text[i]``; returns the next index."""
    char = text[i]
    start = i
    language: str | None = None
    if char == "_":
        kind, i = ("underline", i + 2) if text.startswith("__", i) else ("italic", i + 1)
    elif char == "*":
        kind, i = "bold", i + 1
    elif char == "~":
        kind, i = "strikethrough", i + 1
    elif char == "|" and text.startswith("||", i):
        kind, i = "spoiler", i + 2
    elif char == "[":
        kind, i = "text_link", i + 1
    elif char == "!" and text.startswith("![", i):
        kind, i = "custom_emoji", i + 2
    elif char == "`" and text.startswith("```", i):
        kind, i = "pre", i + 3
        end = i
        while end < len(text) and not text[end].isspace() and text[end] != "`":
            end += 1
        if end != i and end < len(text) and text[end] != "`":
            language, i = text[i:end], end
        # One line break right after the opening fence (or language) is not part of the code.
        if text.startswith(("\r\n", "\n\r"), i):
            i += 2
        elif text.startswith(("\n", "\r"), i):
            i += 1
    elif char == "`":
        kind, i = "code", i + 1
    else:
        raise reserved_error(i)
    stack.append(_OpenMd(kind, offset, start, language))
    return i


def md_url(text: str, i: int) -> tuple[str, int]:
    """Read a MarkdownV2 link target starting after "("; returns (url, index after ")")."""
    start = i
    url: list[str] = []
    while i < len(text) and text[i] != ")":
        if text[i] == "\\" and i + 1 < len(text) and 0 < ord(text[i + 1]) <= 126:
            url.append(text[i + 1])
            i += 2
            continue
        url.append(text[i])
        i += 1
    if i >= len(text):
        raise ParseError(f"Can't find end of a URL at byte offset {byte_offset(text, start)}")
    return "".join(url), i + 1
