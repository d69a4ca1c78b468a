"""What a search shows: its hits with their neighbours, merged into excerpts, up to a budget.

The index ranks single entries (messages, pieces of documents, summaries, facts); the model
needs them in their context. `gather` takes the ranked candidates best first, gives each its
neighbours (NEIGHBOURS: the indexed message after it, where a question's answer or a
remark's reply is; a summary its best messages for the same query; a fact the turn it was
saved in), merges neighbourhoods that overlap or touch
into one excerpt, chronological inside and with no line twice, and keeps adding until the
next excerpt would pass the budget. Sizes are estimated, not tokenized: CHARS_PER_TOKEN
characters make a token (see there), and each line is cut at MAX_LINE_CHARS, so one long
message cannot eat the budget. present.py turns the excerpts into text.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from membot.memory.contract.models import SOURCES_HEAD
from membot.search.hits import SearchHit
from membot.search.period import utc
from membot.search.store import best_between, messages_between, reading

#: The default budget of one search's result, in (estimated) tokens: SEARCH_BUDGET_TOKENS.
DEFAULT_BUDGET_TOKENS = 2000
#: How many ranked candidates a budget is filled from (the index's most).
CANDIDATES = 50
#: Indexed messages shown before and after a hit. After: an answer follows the question whose
#: words found it. Not before: measured on tests/fakes/recall_corpus.py, the one before found no
#: more needed turns for its cost (with the contextual index, a message whose neighbours hold
#: the words is a candidate itself), except when it is a question by someone else that the
#: hit answers: "At nine" means nothing without "When does the museum open?".
NEIGHBOURS = (0, 1)
#: Characters per token of the estimate. Tokenizers give about 4 for English prose, 3 to 4
#: for Russian and fewer for dates and numbers (every line starts with one): 3 keeps the
#: estimate at or above the real count for the text this bot sees, so the budget holds.
CHARS_PER_TOKEN = 3
#: A message (or a document's piece, a summary, a fact) is cut here in what is shown.
MAX_LINE_CHARS = 600
#: A summary hit shows this many of its best messages.
SUMMARY_PICKS = 2
#: Summaries shown in one result. The summary is rolling (each retells the one before) and the
#: index keeps each as an entry, so a topic it kept matches many near-identical paragraphs:
#: the best speaks for them, and the budget goes to messages.
SUMMARY_NOTES = 1
#: Kept for an excerpt's header and the result's first line (present.py stays within them).
HEADER_CHARS = 50
INTRO_CHARS = 40
# Extra rows read around a hit: a neighbour is the next *indexed* message, and tool results
# or empty messages in between are not indexed.
_SLACK = 4

_Key = tuple[int, int, str]  # a line's place: seq, message (0) or document piece (1), text


@dataclass(frozen=True, slots=True)
class Line:
    """One message (or a document's piece) in an excerpt; `hit`: it matched the query."""

    entry: SearchHit
    hit: bool
    # The line does not follow the one above it in the chat (a summary's picks).
    gap_before: bool = False


@dataclass(frozen=True, slots=True)
class Excerpt:
    """A stretch of the chat around one or more hits: summaries and facts that matched
    (`notes`), then the messages in chronological order. `score`: its best hit's."""

    notes: tuple[SearchHit, ...]
    lines: tuple[Line, ...]
    score: float

    @property
    def hits(self) -> tuple[SearchHit, ...]:
        return self.notes + tuple(line.entry for line in self.lines if line.hit)


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def one_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """A message's text on one line (its own line breaks must not look like a new message),
    cut at `limit` characters."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: max(limit - 1, 0)].rstrip() + "…"
    return text


def line_text(entry: SearchHit) -> str:
    """How a message is shown: its id (what an answer cites), date, time, sender, text."""
    when = entry.ts.strftime("%Y-%m-%d %H:%M")
    # A name's line breaks must not start a line of their own either.
    who = f"{entry.role} ({one_line(entry.name)})" if entry.name else entry.role
    return f"[#{entry.seq}] [{when}] {who}: {message_text(entry.content)}"


def message_text(text: str) -> str:
    """`one_line`, but a long answer is cut before its sources (sources_text), up to 2/3."""
    answer, head, sources = text.rpartition(SOURCES_HEAD)
    if not head or not sources.endswith("]"):
        return one_line(text)
    links = one_line(head + sources, MAX_LINE_CHARS * 2 // 3)
    return f"{one_line(answer, max(MAX_LINE_CHARS - len(links) - 1, 1))} {links}".lstrip()


def note_text(note: SearchHit) -> str:
    label = "summary of this part of the chat" if note.kind == "summary" else "remembered fact"
    return f"({label}) {one_line(note.content)}"


def body(excerpt: Excerpt) -> list[str]:
    """The excerpt's lines as shown, without its header."""
    lines = [note_text(n) for n in excerpt.notes]
    for line in excerpt.lines:
        if line.gap_before:
            lines.append("…")
        lines.append(line_text(line.entry))
    return lines


def _key(entry: SearchHit) -> _Key:
    # A document's pieces share their message's seq; they are shown after it.
    return (entry.seq, 0, "") if entry.kind == "message" else (entry.seq, 1, entry.content)


@dataclass
class _Group:
    """An excerpt while it is gathered."""

    spans: list[tuple[int, int]]
    lines: dict[_Key, Line] = field(default_factory=dict)
    notes: dict[tuple[str, str], SearchHit] = field(default_factory=dict)
    score: float = 0.0

    def touches(self, other: _Group) -> bool:
        return any(a <= d + 1 and c <= b + 1 for a, b in self.spans for c, d in other.spans)

    def mark(self, hit: SearchHit) -> bool:
        """Take a hit already shown here; False if it is not."""
        if (hit.kind, hit.content) in self.notes:
            pass
        elif hit.kind in ("message", "document") and _key(hit) in self.lines:
            self.lines[_key(hit)] = Line(hit, hit=True)
        else:
            return False
        self.score = max(self.score, hit.score)
        return True

    def freeze(self) -> Excerpt:
        spans = _merged(self.spans)
        lines: list[Line] = []
        previous: int | None = None
        for key in sorted(self.lines):
            line = self.lines[key]
            span = next((i for i, (a, b) in enumerate(spans) if a <= key[0] <= b), None)
            gap = bool(lines) and (span is None or span != previous)
            lines.append(Line(line.entry, line.hit, gap_before=gap))
            previous = span
        return Excerpt(tuple(self.notes.values()), tuple(lines), self.score)

    def chars(self) -> int:
        return HEADER_CHARS + sum(len(text) + 1 for text in body(self.freeze())) + 1


def _merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for first, last in sorted(spans):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


def _union(groups: Sequence[_Group]) -> _Group:
    union = _Group(spans=[s for g in groups for s in g.spans])
    for group in groups:
        for key, line in group.lines.items():
            if key not in union.lines or line.hit:
                union.lines[key] = line
        union.notes.update(group.notes)
        union.score = max(union.score, group.score)
    return union


def _answers(message: SearchHit, before: SearchHit) -> bool:
    """Whether `message` answers `before`: a question by someone else just before it."""
    asked = before.content.rstrip().endswith("?")
    return asked and (before.role, before.name) != (message.role, message.name)


@dataclass(frozen=True, slots=True)
class _Reader:
    """What a hit's context is read with: the index file, the query, and the period."""

    conn: sqlite3.Connection
    match: str
    neighbours: tuple[int, int]
    since: datetime | None
    until: datetime | None

    def _within(self, rows: list[SearchHit]) -> list[SearchHit]:
        # A period asked for holds the context too: what it shows is of those days.
        return [
            r
            for r in rows
            if (self.since is None or r.ts >= self.since)
            and (self.until is None or r.ts < self.until)
        ]

    def around(self, first: int, last: int) -> list[SearchHit]:
        """The messages first..last, and the set number of indexed messages before and
        after them."""
        before, after = self.neighbours
        rows = self._within(
            messages_between(self.conn, first - before - _SLACK, last + after + _SLACK)
        )
        inside = [r for r in rows if first <= r.seq <= last]
        earlier = [r for r in rows if r.seq < first][-max(before, 1) :]
        if not before and not (inside and earlier and _answers(inside[0], earlier[-1])):
            earlier = []
        later = [r for r in rows if r.seq > last][:after]
        return earlier + inside + later

    def group(self, hit: SearchHit) -> _Group:
        """The hit in its context, as an excerpt of its own."""
        group = _Group(spans=[], score=hit.score)
        if hit.kind == "summary" and hit.covers is not None:
            first, last = hit.covers
            picks = self._within(best_between(self.conn, self.match, first, last, SUMMARY_PICKS))
            group.spans = [(p.seq, p.seq) for p in picks]
            group.lines = {_key(p): Line(p, hit=True) for p in picks}
            group.notes[(hit.kind, hit.content)] = hit
            return group
        if hit.kind == "fact":
            first, last = hit.covers or (hit.seq, hit.seq)
            group.lines = {_key(m): Line(m, hit=False) for m in self.around(first, last)}
            group.notes[(hit.kind, hit.content)] = hit
        else:
            group.lines = {_key(m): Line(m, hit=False) for m in self.around(hit.seq, hit.seq)}
            group.lines[_key(hit)] = Line(hit, hit=True)
        if group.lines:
            seqs = [key[0] for key in group.lines]
            group.spans = [(min(seqs), max(seqs))]
        return group


def gather(
    path: Path,
    hits: Sequence[SearchHit],
    match: str,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    *,
    neighbours: tuple[int, int] = NEIGHBOURS,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[Excerpt]:
    """The hits (best first) in their context, merged into excerpts that together stay
    within `budget_tokens`, best excerpt first. A candidate whose excerpt would pass the
    budget is left out and the next ones are still tried: a shorter one may fit. With a
    period (the search's), the context is of that period too. Reads the index file at
    `path` (in a worker thread: this is blocking I/O)."""
    with reading(path) as conn:
        if conn is None:  # the index went (a reset) since the search: nothing to show
            return []
        first = utc(since) if since is not None else None
        end = utc(until) if until is not None else None
        reader = _Reader(conn, match, neighbours, first, end)
        groups = _fill(reader, hits, budget_tokens * CHARS_PER_TOKEN - INTRO_CHARS)
    return sorted((g.freeze() for g in groups), key=lambda e: -e.score)


def _fill(reader: _Reader, hits: Sequence[SearchHit], room: int) -> list[_Group]:
    groups: list[_Group] = []
    used = summaries = 0
    for hit in hits:
        if hit.kind in ("summary", "fact") and any(group.mark(hit) for group in groups):
            continue
        if hit.kind == "summary" and summaries >= SUMMARY_NOTES:
            continue
        # A hit already shown as another's neighbour still brings its own neighbours.
        new = reader.group(hit)
        touching = [g for g in groups if g.touches(new)]
        merged = _union([*touching, new])
        cost = merged.chars() - sum(g.chars() for g in touching)
        if used + cost <= room:
            used += cost
            summaries += hit.kind == "summary"
            groups = [g for g in groups if g not in touching] + [merged]
        else:
            # Shown already, it is marked as a hit at no cost: lines are cut alike.
            any(group.mark(hit) for group in groups)
    return groups
