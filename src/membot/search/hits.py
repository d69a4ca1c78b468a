"""What a search finds, and how the model is shown it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One archived message that matched; a higher score is a better match."""

    seq: int
    ts: datetime
    role: str
    name: str | None
    content: str
    score: float
    # The other half of a question and its answer, when the hit is one half: the message
    # after a question by someone else, or the question before an answer (store.py adds it).
    context: tuple[SearchHit, ...] = ()


def format_hits(hits: Sequence[SearchHit], max_chars_per_hit: int = 500) -> str:
    """Hits as text for the model: one dated, attributed block per message, best first; a
    hit's question or answer follows it, marked as its context."""
    if not hits:
        return "No matching messages found."
    blocks = []
    for hit in hits:
        lines = [_line(hit, max_chars_per_hit)]
        lines += [f"  (context) {_line(near, max_chars_per_hit)}" for near in hit.context]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _line(hit: SearchHit, max_chars: int) -> str:
    when = hit.ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    who = f"{hit.role} ({hit.name})" if hit.name else hit.role
    # One line per message: the model must not mistake a message's own line breaks for a
    # new hit.
    text = " ".join(hit.content.split())
    if len(text) > max_chars:
        text = text[: max(max_chars - 1, 0)].rstrip() + "…"
    return f"[{when}] {who}: {text}"
