"""Where a remembered answer comes from: a message of the chat's archive that an answer cites.

The model cites what `search_history` showed it by the message's id (`[#<seq>]` after the
sentence it supports, core/citing.py); the answer is stored without the markers and with
its citations, so every front door shows them the same way, a resend after a crash too: the
cited message's date, author and the part of it the answer rests on (`quote`, an exact
substring of the message's text, so Telegram can quote it in a reply).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from membot.clock import iso, parse_iso
from membot.memory.contract.state import opt_int

#: A citation's quote is at most this many characters (Telegram allows 1,024 in a reply's).
QUOTE_CHARS = 200

# A sentence: up to its end mark (kept) or a line break. Words: letters and digits, compared
# by their first five (a rough stem: "moved" finds "moving", "Лиссабоне" finds "Лиссабон").
_SENTENCE = re.compile(r"[^.!?…\n]+[.!?…]*")
_WORD = re.compile(r"\w{3,}")
_STEM = 5


@dataclass(frozen=True, slots=True)
class Citation:
    """A cited message: its seq (the id the model cited), date, author (the sender's name,
    else its role), the cited part of its text, its role, and the Telegram message to reply
    to (a user's message; None otherwise). `verbatim`: the quote is a substring of the text
    Telegram has for that message (not of a voice message's transcript or a document's)."""

    id: int
    ts: datetime
    author: str
    quote: str
    role: str = "user"
    tg_message_id: int | None = None
    verbatim: bool = False

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "ts": iso(self.ts), "author": self.author}
        data.update(quote=self.quote, role=self.role)
        if self.tg_message_id is not None:
            data["tg_message_id"] = self.tg_message_id
        if self.verbatim:
            data["verbatim"] = True
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Citation:
        return cls(
            id=int(data["id"]),
            ts=parse_iso(data["ts"]),
            author=str(data.get("author") or ""),
            quote=str(data.get("quote") or ""),
            role=str(data.get("role") or "user"),
            tg_message_id=opt_int(data.get("tg_message_id")),
            verbatim=data.get("verbatim") is True,
        )


def pick_quote(text: str, near: str = "", limit: int = QUOTE_CHARS) -> str:
    """The part of `text` an answer's sentence `near` rests on, as an exact substring of it:
    the whole text when it is short, else its sentence sharing the most words with `near`
    (the first on a tie), cut at a word within `limit` characters."""
    whole = text.strip()
    if len(whole) <= limit:
        return whole
    wanted = _stems(near)
    sentences = [s.group().strip() for s in _SENTENCE.finditer(text)]
    sentences = [s for s in sentences if s] or [whole]
    best = max(sentences, key=lambda s: len(_stems(s) & wanted))
    if len(best) <= limit:
        return best
    cut = best[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip()


def _stems(text: str) -> set[str]:
    return {word[:_STEM] for word in _WORD.findall(text.casefold())}
