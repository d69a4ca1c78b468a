"""Telegram's legacy Markdown parse mode, modelled on TDLib's parse_markdown."""

from __future__ import annotations

from typing import Any

from tests.fakes.telegram.markup.text import (
    ParseError,
    byte_offset,
    sort_entities,
    u16,
    utf16_len,
)


def parse_markdown(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse legacy Markdown (``*bold*``, ``_italic_``, code, pre, ``[text](url)``)."""
    out: list[str] = []
    offset = 0
    entities: list[dict[str, Any]] = []
    i = 0
    n = len(text)
    while i < n:
        char = text[i]
        if char == "\\" and i + 1 < n and text[i + 1] in "_*`[":
            out.append(text[i + 1])
            offset += 1
            i += 2
            continue
        if char not in "_*`[":
            out.append(char)
            offset += u16(char)
            i += 1
            continue
        begin = i
        language: str | None = None
        if text.startswith("```", i):
            kind, closer, i = "pre", "```", i + 3
            end = i
            while end < n and not text[end].isspace() and text[end] != "`":
                end += 1
            if end != i and end < n and text[end] != "`":
                language, i = text[i:end], end
        else:
            kind = {"_": "italic", "*": "bold", "`": "code", "[": "text_link"}[char]
            closer = "]" if char == "[" else char
            i += 1
        end = text.find(closer, i)
        if end == -1:
            raise ParseError(
                f"Can't find end of the entity starting at byte offset {byte_offset(text, begin)}"
            )
        inner = text[i:end]
        start_offset = offset
        out.append(inner)
        offset += utf16_len(inner)
        i = end + len(closer)
        entity: dict[str, Any] = {
            "type": kind,
            "offset": start_offset,
            "length": offset - start_offset,
        }
        if language:
            entity["language"] = language
        if kind == "text_link":
            url = ""
            if text.startswith("(", i):
                close = text.find(")", i)
                if close == -1:
                    raise ParseError(
                        f"Can't find end of a URL at byte offset {byte_offset(text, i)}"
                    )
                url, i = text[i + 1 : close], close + 1
            if not url:
                continue
            entity["url"] = url
        if entity["length"] > 0:
            entities.append(entity)
    return "".join(out), sort_entities(entities)
