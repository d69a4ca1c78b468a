"""Text out of bytes that claim to be text, and long text in pieces.

Decoding never fails: UTF-8 (with or without a byte order mark), UTF-16 with its mark, then
the two legacy code pages people still send (Windows-1251 for Cyrillic, Windows-1252 for
Western text), told apart by which gives letters; last, UTF-8 with replacement characters."""

from __future__ import annotations

import codecs
import re

from membot.media.errors import BrokenFile
from membot.textcut import boundary

#: Share of NUL bytes above which "text" is really a binary file.
_BINARY_NULS = 0.01
_WORDS = re.compile(r"[^\W\d_]+")


def decode_text(data: bytes) -> str:
    """``data`` as text, by the first encoding that fits. Raises BrokenFile for binary data."""
    for bom, encoding in ((codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(encoding, errors="replace")
    if data.count(0) > max(1, len(data) * _BINARY_NULS):
        raise BrokenFile("text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    return _legacy(data) or data.decode("utf-8", errors="replace")


def _legacy(data: bytes) -> str | None:
    """Windows-1251 when its words read as Cyrillic ones, else Windows-1252 when it
    decodes at all; None when neither fits."""
    if all(b < 0x80 for b in data):
        return None
    try:
        cyrillic = data.decode("cp1251")
    except UnicodeDecodeError:
        cyrillic = None
    if cyrillic is not None and _reads_as_cyrillic(cyrillic):
        return cyrillic
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return cyrillic


def _reads_as_cyrillic(text: str) -> bool:
    """Whether words are Cyrillic through and through: Western text read as Windows-1251
    gives Latin words with a Cyrillic letter inside ("cafй"), Russian gives whole words."""
    whole = mixed = 0
    for word in _WORDS.findall(text):
        cyrillic = sum(1 for c in word if "\u0400" <= c <= "\u04ff")
        if cyrillic == len(word):
            whole += 1
        elif cyrillic:
            mixed += 1
    return whole > mixed


def cut_for_prompt(text: str, limit: int) -> tuple[str, bool]:
    """``text`` of at most about ``limit`` characters for the model, with a note saying it
    was cut and how much the whole has; True as the second value when it was cut."""
    if len(text) <= limit:
        return text, False
    head = text[: boundary(text[:limit])].rstrip()
    note = (
        f"\n\n[The document continues: {len(head)} of {len(text)} characters are shown here; "
        "the rest is kept and can be found with search_history.]"
    )
    return head + note, True
