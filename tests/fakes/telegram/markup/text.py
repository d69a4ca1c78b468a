"""What the markup parsers share: UTF-16 lengths (Telegram's unit), byte offsets for error
messages, the entity types Telegram knows and the parse error.
"""

from __future__ import annotations

from typing import Any

ENTITY_TYPES = frozenset(
    {
        "bold",
        "italic",
        "underline",
        "strikethrough",
        "spoiler",
        "code",
        "pre",
        "text_link",
        "blockquote",
        "expandable_blockquote",
        "url",
        "mention",
        "hashtag",
        "cashtag",
        "bot_command",
        "email",
        "phone_number",
        "text_mention",
        "custom_emoji",
        "date_time",
    }
)


class ParseError(Exception):
    """Markup/entity problem; the message is what follows "can't parse entities: "."""


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of every Telegram offset and length limit."""
    return len(text.encode("utf-16-le")) // 2


def u16(char: str) -> int:
    return 2 if ord(char) > 0xFFFF else 1


def byte_offset(text: str, index: int) -> int:
    # Telegram's parse errors report UTF-8 byte offsets into the submitted text.
    return len(text[:index].encode("utf-8", errors="surrogatepass"))


def sort_entities(entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Telegram returns entities ordered by offset, outer (longer) entity first.
    return sorted(entities, key=lambda e: (e["offset"], -e["length"]))


def plain_slice(out: list[str], start: int, end: int) -> str:
    """The output text between two UTF-16 offsets (for ``[url]`` links without a target)."""
    plain = "".join(out)
    units = plain.encode("utf-16-le")
    return units[start * 2 : end * 2].decode("utf-16-le", errors="replace")
