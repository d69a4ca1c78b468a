"""What a search finds: one ranked entry of a chat's index (excerpts.py shows it in context)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One archived message that matched; a higher score is a better match."""

    seq: int
    ts: datetime
    role: str
    name: str | None
    content: str
    score: float
    # "message" | "document" (a piece of a document a message brought) | "summary" | "fact".
    kind: str = "message"
    # The first..last seq a summary or a fact points back to (a fact: its turn's seq twice).
    covers: tuple[int, int] | None = None
