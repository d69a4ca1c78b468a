"""Telegram's HTML parse mode, modelled on TDLib's parse_html."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from tests.fakes.telegram.markup.text import (
    ParseError,
    byte_offset,
    sort_entities,
    u16,
    utf16_len,
)

_HTML_SIMPLE_TAGS = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
    "code": "code",
    "pre": "pre",
}


_HTML_TAGS = frozenset({*_HTML_SIMPLE_TAGS, "a", "blockquote", "tg-emoji", "tg-time"})


_HTML_TAG_NAME = re.compile(r"[A-Za-z0-9-]*")


_HTML_ATTR = re.compile(
    r"""\s*([A-Za-z0-9_-]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?""",
)


_HTML_ENTITY = re.compile(r"&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|(lt|gt|amp|quot));")


_HTML_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


@dataclass(slots=True)
class _OpenTag:
    name: str
    attrs: dict[str, str]
    offset: int
    language: str | None = None


def parse_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse Telegram HTML into (plain text, entities); raises ParseError like Telegram.

    Stricter than Telegram in one place, on purpose: a bare ``&`` that does not start an HTML
    entity is rejected (Telegram's docs require escaping it, its parser happens to tolerate it),
    so the bot cannot rely on lenient behaviour.
    """
    out: list[str] = []
    offset = 0
    stack: list[_OpenTag] = []
    entities: list[dict[str, Any]] = []
    i = 0
    n = len(text)
    while i < n:
        char = text[i]
        if char == "&":
            match = _HTML_ENTITY.match(text, i)
            if match is None:
                raise ParseError(
                    f"Character '&' at byte offset {byte_offset(text, i)} must be escaped as "
                    "&amp; (it does not start an HTML entity)"
                )
            decoded = _decode_html_entity(match)
            out.append(decoded)
            offset += utf16_len(decoded)
            i = match.end()
            continue
        if char != "<":
            out.append(char)
            offset += u16(char)
            i += 1
            continue
        byte_at = byte_offset(text, i)
        if text.startswith("</", i):
            end = text.find(">", i)
            if end == -1:
                raise ParseError(f"Unclosed end tag at byte offset {byte_at}")
            name = text[i + 2 : end].strip().lower()
            if not stack:
                raise ParseError(f"Unexpected end tag at byte offset {byte_at}")
            tag = stack.pop()
            if name != tag.name:
                raise ParseError(
                    f'Unmatched end tag at byte offset {byte_at}, expected "</{tag.name}>", '
                    f'found "</{name}>"'
                )
            entity = _html_entity(tag, offset, stack)
            if entity is not None:
                entities.append(entity)
            i = end + 1
            continue
        name_match = _HTML_TAG_NAME.match(text, i + 1)
        name = name_match.group(0).lower() if name_match else ""
        if name not in _HTML_TAGS:
            raise ParseError(f'Unsupported start tag "{name}" at byte offset {byte_at}')
        j = i + 1 + len(name)
        attrs: dict[str, str] = {}
        while True:
            while j < n and text[j].isspace():
                j += 1
            if j >= n:
                raise ParseError(f"Unclosed start tag at byte offset {byte_at}")
            if text[j] == ">":
                break
            attr = _HTML_ATTR.match(text, j)
            if attr is None or attr.end() == j:
                raise ParseError(
                    f'Empty attribute name in the tag "{name}" at byte offset {byte_at}'
                )
            value = next((g for g in attr.groups()[1:] if g is not None), "")
            attrs[attr.group(1).lower()] = html.unescape(value)
            j = attr.end()
        if name == "span" and attrs.get("class") != "tg-spoiler":
            raise ParseError(f'Tag "span" must have class "tg-spoiler" at byte offset {byte_at}')
        if name == "tg-emoji" and not attrs.get("emoji-id"):
            raise ParseError(f'Tag "tg-emoji" must have attribute "emoji-id" at byte {byte_at}')
        stack.append(_OpenTag(name, attrs, offset))
        i = j + 1
    if stack:
        raise ParseError(f'Can\'t find end tag corresponding to start tag "{stack[-1].name}"')
    return "".join(out), sort_entities(entities)


def _decode_html_entity(match: re.Match[str]) -> str:
    decimal, hexadecimal, named = match.groups()
    if named is not None:
        return _HTML_NAMED[named]
    code = int(decimal) if decimal is not None else int(hexadecimal, 16)
    if not 0 < code <= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise ParseError(f"Invalid HTML entity {match.group(0)}")
    return chr(code)


def _html_entity(tag: _OpenTag, end: int, stack: list[_OpenTag]) -> dict[str, Any] | None:
    length = end - tag.offset
    if length <= 0:
        return None  # Telegram silently drops empty entities.
    base: dict[str, Any] = {"offset": tag.offset, "length": length}
    if tag.name == "code" and stack and stack[-1].name == "pre":
        # <pre><code class="language-x"> is one pre entity carrying the language.
        css = tag.attrs.get("class", "")
        if css.startswith("language-"):
            stack[-1].language = css.removeprefix("language-")
        return None
    if tag.name == "pre":
        return {"type": "pre", **base, **({"language": tag.language} if tag.language else {})}
    if tag.name in _HTML_SIMPLE_TAGS:
        return {"type": _HTML_SIMPLE_TAGS[tag.name], **base}
    if tag.name == "a":
        url = tag.attrs.get("href", "")
        return {"type": "text_link", **base, "url": url} if url else None
    if tag.name == "blockquote":
        kind = "expandable_blockquote" if "expandable" in tag.attrs else "blockquote"
        return {"type": kind, **base}
    if tag.name == "tg-emoji":
        return {"type": "custom_emoji", **base, "custom_emoji_id": tag.attrs["emoji-id"]}
    # tg-time
    try:
        unix_time = int(tag.attrs.get("unix", ""))
    except ValueError:
        raise ParseError('Tag "tg-time" must have a numeric "unix" attribute') from None
    entity = {"type": "date_time", **base, "unix_time": unix_time}
    if "format" in tag.attrs:
        entity["date_time_format"] = tag.attrs["format"]
    return entity
