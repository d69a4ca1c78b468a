"""Text out of bytes that claim to be text, and long text in pieces.

What a text file is, decided once here for every door that takes one (Telegram documents,
API attachments): bytes that decode as UTF-8 (with or without a byte order mark; a last
character cut off at the end is dropped), as UTF-16 with its mark, or as one of the two
legacy code pages people still send (Windows-1251 for Cyrillic, Windows-1252 for Western
text, told apart by which gives letters; bytes that fit neither are not text), and whose
text has no NUL and at most 1% of other control characters (tab, line breaks, form feed
and the escape of coloured logs are not counted). Anything else is binary data under a
text name: NotThatKind("text")."""

from __future__ import annotations

import codecs
import re
import unicodedata

from membot.media.errors import NotThatKind
from membot.textcut import boundary

#: Share of control characters above which "text" is really binary data.
_CONTROL_SHARE = 0.01
#: Control characters that text has: tab, line feed, vertical tab, form feed, carriage
#: return, and the escape of ANSI colours in logs.
_TEXT_CONTROLS = frozenset("\t\n\v\f\r\x1b")
_WORDS = re.compile(r"[^\W\d_]+")


def decode_text(data: bytes) -> str:
    """``data`` as text, by the first encoding that fits. Raises NotThatKind("text") for
    what is not text (see the module's docstring)."""
    text = _decoded(data)
    if text is None or not is_text(text):
        raise NotThatKind("text")
    return text


def is_text(text: str) -> bool:
    """Whether decoded ``text`` reads as text: no NUL, at most 1% other control characters."""
    if "\0" in text:
        return False
    controls = sum(1 for c in text if c not in _TEXT_CONTROLS and unicodedata.category(c) == "Cc")
    return controls <= len(text) * _CONTROL_SHARE


def _decoded(data: bytes) -> str | None:
    for bom in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        if data.startswith(bom):
            try:
                return data.decode("utf-16")
            except UnicodeDecodeError:
                return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # Cut in the middle of its last character, when the rest shows it is UTF-8 (a
        # Windows-1252 "café" ends the same way, with no UTF-8 before it).
        head = (
            data[: exc.start].decode("utf-8-sig") if exc.reason == "unexpected end of data" else ""
        )
        if not head.isascii():
            return head
    return _legacy(data)


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
