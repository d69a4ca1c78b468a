"""An answer's sources (the pages a web search found that it cites) as stored with it, and as
they read in later prompts and in the search index."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Source:
    """A page an answer drew on (a web search's result the model cited): its address and
    title, kept with the answer so later turns, the search and a resend show the same links."""

    url: str
    title: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"url": self.url, "title": self.title} if self.title else {"url": self.url}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Source:
        url = data["url"]
        if not isinstance(url, str) or not url:
            raise ValueError("bad source url")
        return cls(url=url, title=str(data.get("title") or ""))


# How a stored answer's sources read as text, after it: in the prompt of later turns (so the
# model knows which links it gave, and does not take the list for words of its own) and in
# the search index (so a page's title or address finds the answer).
SOURCES_HEAD = "[Sources shown to the user under this answer:"


#: A source's title in that note is cut at this many characters: a page names itself, and a
#: title is the page's words, not ours, so it must not run on in every later prompt.
NOTE_TITLE_CHARS = 200


def sources_text(sources: Sequence[Source]) -> str:
    """The sources as numbered lines, in a bracketed note ("" without any). A title's
    brackets and line breaks are replaced, so a page's title cannot end the note early or
    pass for a line of its own."""
    if not sources:
        return ""
    lines = []
    for n, source in enumerate(sources, 1):
        title = _note_safe(source.title)
        if len(title) > NOTE_TITLE_CHARS:
            title = title[: NOTE_TITLE_CHARS - 1].rstrip() + "…"
        url = _note_safe(source.url)
        lines.append(f"{n}. {title}: {url}" if title else f"{n}. {url}")
    return SOURCES_HEAD + "\n" + "\n".join(lines) + "]"


_NOTE_UNSAFE = str.maketrans({"[": "(", "]": ")"})


def _note_safe(text: str) -> str:
    return " ".join(text.split()).translate(_NOTE_UNSAFE)
