"""Cutting long text at natural boundaries: for the search index (a document's pieces,
membot.search) and for the prompt (media.text.cut_for_prompt). Below both, so the bot and
`membot search` cut a document the same way without either importing the other."""

from __future__ import annotations

import re

_SPACES = re.compile(r"\s*")


def chunk_text(text: str, size: int) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, cut at a paragraph, line, sentence
    or word boundary where one lies in the second half of the piece; blank pieces dropped."""
    if size < 1:
        raise ValueError("size must be at least 1")
    pieces: list[str] = []
    text = text.strip()
    # An offset into the text, never a copy of its rest: copying made a 20 MB document
    # quadratic (seconds of CPU).
    start = 0
    while len(text) - start > size:
        window = text[start : start + size]
        cut = boundary(window)
        pieces.append(window[:cut].strip())
        spaces = _SPACES.match(text, start + cut)  # always matches: \s* may be empty
        start = spaces.end() if spaces else start + cut
    if start < len(text):
        pieces.append(text[start:])
    return [piece for piece in pieces if piece]


def boundary(window: str) -> int:
    """Where to cut `window`: after the last paragraph, line, sentence or word break in its
    second half, else at its end."""
    half = len(window) // 2
    for separator in ("\n\n", "\n", ". ", " "):
        at = window.rfind(separator, half)
        if at != -1:
            return at + len(separator)
    return len(window)
