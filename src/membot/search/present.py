"""Excerpts as text: what the model gets from `search_history` and what `membot search`
prints (the same function, so an operator sees exactly what the model saw), and as JSON.

`now` is always passed in (membot.clock in the callers): an excerpt's age ("3 months ago")
is the only thing here that depends on it, and tests fix it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from membot.memory.contract.models import iso
from membot.search.excerpts import Excerpt, Line, body
from membot.search.hits import SearchHit

NOTHING = "No matching messages found."
INTRO = "Best matches first; times are UTC."  # within excerpts.INTRO_CHARS


def age(then: datetime, now: datetime) -> str:
    """How long before `now`, in the unit a person would use: "yesterday", "3 weeks ago"."""
    day, today = then.astimezone(UTC).date(), now.astimezone(UTC).date()
    days = (today - day).days
    if days <= 0:
        return "today"  # a clock a little behind the message's is still today
    if days == 1:
        return "yesterday"
    if days < 14:
        return f"{days} days ago"
    months = (today.year - day.year) * 12 + today.month - day.month - (today.day < day.day)
    if months < 2:
        return f"{days // 7} weeks ago"
    if months < 24:
        return f"{months} months ago"
    return f"{months // 12} years ago"


def _when(excerpt: Excerpt) -> tuple[datetime, datetime]:
    times = [line.entry.ts for line in excerpt.lines] or [n.ts for n in excerpt.notes]
    return min(times), max(times)


def header(excerpt: Excerpt, now: datetime) -> str:
    first, last = (t.astimezone(UTC) for t in _when(excerpt))
    days = f"{first:%Y-%m-%d}"
    if last.date() != first.date():
        days += f" to {last:%Y-%m-%d}"
    # At most 48 characters: within what the budget keeps for it (excerpts.HEADER_CHARS).
    return f"--- {days} ({age(first, now)}) ---"


def format_excerpts(excerpts: Sequence[Excerpt], now: datetime) -> str:
    """The excerpts for the model (and `membot search`): best first, each under a header
    with its dates and age, one dated line per message."""
    if not excerpts:
        return NOTHING
    blocks = [INTRO]
    blocks += ["\n".join([header(e, now), *body(e)]) for e in excerpts]
    return "\n\n".join(blocks)


def _entry(hit: SearchHit) -> dict[str, object]:
    return {
        "seq": hit.seq,
        "kind": hit.kind,
        "ts": iso(hit.ts),
        "role": hit.role,
        "name": hit.name,
        "content": hit.content,
    }


def _message(line: Line) -> dict[str, object]:
    return {
        **_entry(line.entry),
        "hit": line.hit,
        "score": _score(line.entry) if line.hit else None,
    }


def _score(hit: SearchHit) -> float:
    return round(hit.score, 4)


def excerpts_json(excerpts: Sequence[Excerpt]) -> list[dict[str, object]]:
    """One object per excerpt: its messages in full (each with its seq and whether it is a
    hit), the hits' seqs and the neighbours' seqs; summaries and facts that matched, with the
    seqs they cover."""
    out: list[dict[str, object]] = []
    for excerpt in excerpts:
        first, last = _when(excerpt)
        hits = {line.entry.seq for line in excerpt.lines if line.hit}
        out.append(
            {
                "score": round(excerpt.score, 4),
                "from": iso(first),
                "to": iso(last),
                "notes": [
                    {
                        **_entry(n),
                        "covers": list(n.covers) if n.covers else None,
                        "score": _score(n),
                    }
                    for n in excerpt.notes
                ],
                "messages": [_message(line) for line in excerpt.lines],
                "hits": sorted(hits),
                "neighbours": sorted({line.entry.seq for line in excerpt.lines} - hits),
            }
        )
    return out
