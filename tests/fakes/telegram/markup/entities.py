"""Explicit ``entities`` checked against their text, as Telegram checks them."""

from __future__ import annotations

from typing import Any

from tests.fakes.telegram.markup.text import (
    ENTITY_TYPES,
    ParseError,
)


def validate_entities(text: str, entities: Any) -> list[dict[str, Any]]:
    """Check explicit ``entities`` against ``text`` (UTF-16 offsets); raises ParseError.

    Also rejects an entity boundary inside a surrogate pair: Telegram would silently render
    garbage, and it is the classic symptom of offsets counted in code points, not UTF-16.
    """
    if not isinstance(entities, list):
        raise ParseError("entities must be an array of MessageEntity objects")
    encoded = text.encode("utf-16-le")
    total = len(encoded) // 2
    checked: list[dict[str, Any]] = []
    for index, entity in enumerate(entities):
        if not isinstance(entity, dict):
            raise ParseError(f"entity #{index} is not an object")
        kind = entity.get("type")
        where = f"entity #{index} ({kind})"
        if kind not in ENTITY_TYPES:
            raise ParseError(f"entity #{index}: unsupported type {kind!r}")
        offset, length = entity.get("offset"), entity.get("length")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ParseError(f"{where}: offset must be a non-negative integer, got {offset!r}")
        if not isinstance(length, int) or isinstance(length, bool) or length <= 0:
            raise ParseError(f"{where}: length must be a positive integer, got {length!r}")
        if offset + length > total:
            raise ParseError(
                f"{where}: offset {offset} + length {length} exceeds the text length of "
                f"{total} UTF-16 code units"
            )
        for boundary in (offset, offset + length):
            if 0 < boundary < total and 0xDC00 <= _unit(encoded, boundary) <= 0xDFFF:
                raise ParseError(f"{where}: boundary {boundary} splits a surrogate pair")
        if kind == "text_link" and not (isinstance(entity.get("url"), str) and entity["url"]):
            raise ParseError(f"{where}: text_link requires a non-empty url")
        if kind == "text_mention" and not isinstance(entity.get("user"), dict):
            raise ParseError(f"{where}: text_mention requires a user")
        if kind == "custom_emoji" and not entity.get("custom_emoji_id"):
            raise ParseError(f"{where}: custom_emoji requires custom_emoji_id")
        if kind == "date_time" and not isinstance(entity.get("unix_time"), int):
            raise ParseError(f"{where}: date_time requires unix_time")
        checked.append(dict(entity))
    return checked


def _unit(encoded: bytes, index: int) -> int:
    return int.from_bytes(encoded[index * 2 : index * 2 + 2], "little")
