"""An answer's citations of the chat's archive: the `[#<id>]` markers the model writes after a
sentence that rests on a message `search_history` showed it (search/excerpts.py starts each
message's line with its id, its seq).

No marker ever reaches a reader. The streamed text goes through `MarkerFilter`, which holds
back a tail that may still become a marker (`[`, `[#1`, `[#12, #`) and the blank space before
it; the answer, the text beside a tool call and a stopped answer go through `strip_markers`,
the same rule at once, so the pieces of a stream add up to the answer. `cite` turns the
markers of an answer into citations: only ids the turn's searches returned (`Recalled`), each
once, in the order first cited; a made-up id is dropped, never shown.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from membot.memory.contract.citation import Citation, pick_quote
from membot.memory.contract.models import Message

if TYPE_CHECKING:
    from membot.ids import ConversationId
    from membot.memory.contract.repository import ChatRepository
    from membot.memory.contract.sources import Source
    from membot.search.excerpts import Excerpt
    from membot.search.hits import SearchHit

log = logging.getLogger(__name__)

#: At most this many citations per answer; more markers are taken out like the others.
MAX_CITATIONS = 5

_ID = r"\d{1,9}"
# A marker: one id or several ("[#12]", "[#12, #15]", "[#12,15]"), with the blank space
# before it (a few characters: "supports it [#3]." reads "supports it.").
MARKER = re.compile(rf"\s{{0,4}}\[#({_ID}(?:\s?,\s?#?{_ID})*)\]")
# What may still become a marker at the end of a text written so far.
_PARTIAL = re.compile(rf"\[(?:#(?:{_ID}(?:\s?,\s?#?\d{{0,9}})*)?)?")
_SENTENCE_END = re.compile(r"[.!?…\n]")
# Kinds of attachment whose message's text is not what Telegram has (a transcript).
_HEARD = frozenset({"voice", "audio", "video_note"})


def strip_markers(text: str, *, finished: bool = True) -> str:
    """`text` without its markers; `finished` False (an answer cut short by a stop): without
    a marker begun at its end either."""
    clean = MARKER.sub("", text)
    return clean if finished else clean[: _safe_end(clean)]


def _safe_end(text: str) -> int:
    """Where what cannot become a marker ends: before a partial marker at the end and the
    blank space before it."""
    start = text.rfind("[")
    end = start if start != -1 and _PARTIAL.fullmatch(text, start) else len(text)
    return len(text[:end].rstrip())


class MarkerFilter:
    """A streamed text without its markers: `feed` each piece, `flush` at the end."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, piece: str) -> str:
        text = self._pending + piece
        end = _safe_end(text)
        self._pending = text[end:]
        return MARKER.sub("", text[:end])

    def flush(self) -> str:
        text, self._pending = self._pending, ""
        return MARKER.sub("", text)


@dataclass
class Recalled:
    """The messages the turn's `search_history` calls showed the model, by seq: the only
    ids an answer may cite."""

    shown: dict[int, SearchHit] = field(default_factory=dict)

    def add(self, excerpts: list[Excerpt]) -> None:
        for excerpt in excerpts:
            for line in excerpt.lines:
                known = self.shown.get(line.entry.seq)
                if known is None or known.kind != "message":  # a message over its document
                    self.shown[line.entry.seq] = line.entry


class Citing(Protocol):
    """Where a turn's citations are looked up (core/tools/context.py TurnContext)."""

    @property
    def recalled(self) -> Recalled: ...
    @property
    def repository(self) -> ChatRepository: ...
    @property
    def conversation(self) -> ConversationId: ...


async def cited_answer(
    text: str, ctx: Citing, sources: Sequence[Source], *, stopped: bool = False
) -> Message:
    """The turn's answer as stored: without its markers, with what it cites and its sources
    (`stopped`: cut short by the user, a marker begun at its end dropped too)."""
    text, quoted = await cite(
        text, ctx.recalled, ctx.repository, ctx.conversation, finished=not stopped
    )
    if stopped:
        text = text.strip()
    return Message(
        role="assistant",
        content=text,
        stopped=stopped,
        sources=tuple(sources),
        citations=quoted,
    )


async def cite(
    text: str,
    recalled: Recalled,
    repository: ChatRepository,
    cid: ConversationId,
    *,
    finished: bool = True,
) -> tuple[str, tuple[Citation, ...]]:
    """The answer without its markers, and the messages it cites (see the module)."""
    found: list[tuple[int, str]] = []  # (seq, the sentence that cites it)
    made_up = 0
    for marker in MARKER.finditer(text):
        before = text[: marker.start()]
        sentence = _SENTENCE_END.split(before.rstrip(".!?… "))[-1]
        for raw in re.findall(r"\d+", marker.group(1)):
            seq = int(raw)
            if seq not in recalled.shown:
                made_up += 1
            elif seq not in (s for s, _ in found) and len(found) < MAX_CITATIONS:
                found.append((seq, sentence))
    if made_up:
        log.info("%s: %d cited id(s) the search did not show, dropped", cid, made_up)
    citations = [await _citation(recalled.shown[seq], near, repository, cid) for seq, near in found]
    return strip_markers(text, finished=finished), tuple(citations)


async def _citation(
    hit: SearchHit, near: str, repository: ChatRepository, cid: ConversationId
) -> Citation:
    """The cited message as stored (its Telegram id, its whole text), else as the search
    showed it (the storage cannot be read now)."""
    message = await _stored(repository, cid, hit.seq)
    if message is None or not message.content.strip():
        name = message.name if message is not None else hit.name
        role = message.role if message is not None else hit.role
        quote = pick_quote(hit.content, near)
        return Citation(hit.seq, hit.ts, name or role, quote, role)
    tg_id = message.tg_message_id if message.role == "user" else None
    heard = any(a.kind in _HEARD for a in message.attachments)
    return Citation(
        id=message.seq,
        ts=message.ts,
        author=message.name or message.role,
        quote=pick_quote(message.content, near),
        role=message.role,
        tg_message_id=tg_id,
        verbatim=tg_id is not None and not heard,
    )


async def _stored(repository: ChatRepository, cid: ConversationId, seq: int) -> Message | None:
    messages = repository.iter_messages(cid, seq - 1)
    try:
        async for message in messages:
            return message if message.seq == seq else None
    except Exception as exc:  # a citation is shown from what the search showed
        log.debug("%s: a cited message not read (%s)", cid, type(exc).__name__)
    finally:
        await messages.aclose()
    return None
