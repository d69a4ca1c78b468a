"""What /forget looks for (core/forget.py): a request's words, and everything the archive keeps
of a message as one text to look in."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence

from membot.memory.contract.models import Message, sources_text
from membot.search.text import normalize, query_terms, stems

# Fewer letters or digits would match nearly every message ("a" is in most of them, a
# phrase being matched as written): /forget, forget_messages and the API refuse them alike.
MIN_CHARS = 2


def enough(words: str) -> bool:
    """Whether `words` name something to look for: at least MIN_CHARS letters or digits."""
    return sum(c.isalnum() for c in words) >= MIN_CHARS and bool(Words(words))


class Words:
    """What a request looks for, and whether a text holds it."""

    def __init__(self, words: str) -> None:
        self.phrase = normalize(" ".join(words.split()))
        self.stems = frozenset(stems(" ".join(query_terms(words))))

    def __bool__(self) -> bool:
        return bool(self.stems)

    def held_by(self, text: str) -> bool:
        norm = normalize(text)
        if self.phrase and self.phrase in norm:
            return True
        # Snowball changes only a word's ending: a stem's first letters are in the text.
        if not all(stem[:3] in norm for stem in self.stems):
            return False
        return self.stems <= set(stems(text))


def said(message: Message, documents: Sequence[str] = ()) -> str:
    """Everything the archive keeps of what a message said, as one text."""
    quote = message.delivery.quote if message.delivery else ""  # a group's answer quotes
    cited = [c.quote for c in message.citations]  # an answer's quotes of the archive
    # An imported message's name is its conversation's title ("ChatGPT: <title>").
    title = message.name if message.origin is not None else None
    parts = [message.content, sources_text(message.sources), quote, *cited, *documents, title]
    parts += [a.name or "" for a in message.attachments]
    for call in message.tool_calls:
        arguments = str((call.get("function") or {}).get("arguments", ""))
        parts.append(arguments)
        with contextlib.suppress(ValueError):  # "\u0445" in the JSON is "х" in the text
            parts.append(json.dumps(json.loads(arguments), ensure_ascii=False))
    return "\n".join(part for part in parts if part)


def text_of(message: Message, documents: Sequence[bytes]) -> str:
    return said(message, [d.decode("utf-8", errors="replace") for d in documents])
