"""What of a reply may be shown while it is written. A model may write a Hermes tool call
as text (in hermes mode always, in native mode now and then): the text before it can be
shown, the call itself never. From the first tool tag on, nothing more of the reply is shown
(the whole reply is parsed once it is complete); a tail that could be the start of a tag is
held back until the next piece tells. Blank space at either end is held too, as the parsed
reply has none there, so the pieces of a plain answer add up to the answer."""

from __future__ import annotations

_TAGS = (
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<tools>",
    "</tools>",
)
_LONGEST = max(map(len, _TAGS))


class VisibleText:
    """`feed(piece)` returns what may be shown now; `stopped` once a tool tag was seen."""

    def __init__(self) -> None:
        self.pending = ""
        self.started = False
        self.stopped = False

    def feed(self, piece: str) -> str:
        if self.stopped:
            return ""
        text = self.pending + piece
        if not self.started:
            text = text.lstrip()
            self.started = bool(text)
        lower = text.lower()
        cut = min((i for tag in _TAGS if (i := lower.find(tag)) != -1), default=-1)
        if cut != -1:
            self.stopped = True
            self.pending = ""
            return text[:cut].rstrip()
        hold = _tag_start(lower)
        shown = text[: len(text) - hold]
        kept = shown.rstrip()
        self.pending = shown[len(kept) :] + text[len(text) - hold :]
        return kept


def _tag_start(lower: str) -> int:
    """How many characters at the end of `lower` could begin a tool tag. A tag has its only
    "<" first, so only the tail from the last "<" can."""
    at = lower.rfind("<", max(0, len(lower) - _LONGEST + 1))
    if at == -1:
        return 0
    tail = lower[at:]
    return len(tail) if any(tag.startswith(tail) for tag in _TAGS) else 0
