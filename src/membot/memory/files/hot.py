"""Recent conversations' contexts, kept in memory by the files backend, and reading one.

A turn starts by reading its conversation's context: the last WINDOW_SIZE messages, the
summary, meta and the facts, four files read in a worker thread. The files backend is the
only writer of its DATA_DIR (one process per DATA_DIR), so a context once read is kept true
by that backend's own writes: an append adds its messages to it, every other write (a
summary, a state, facts, a reset) drops it, to be read again by the next turn. The one
exception is the facts, which `membot mcp` may change beside the bot: a context is used only
while facts.json is the file it was read with. Only the
event loop's thread touches it. Bounded (least recently used first out): memory grows with
the conversations in use, not with those stored.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from membot.ids import ConversationId
from membot.memory.contract.models import ChatContext, ChatMeta, Message
from membot.memory.files.archive import UNREAD, Unread, read_tail, read_text
from membot.memory.files.delivery import UNKNOWN, Known
from membot.memory.files.layout import MESSAGES, SUMMARY, load_meta
from membot.memory.files.smallfiles import FACTS, facts_signature, read_facts

# Conversations whose context is kept: a few hundred KiB each at most (a window of long
# messages), so a few hundred MiB at worst, and a few MiB for everyday chats.
CAPACITY = 1024


@dataclass(slots=True)
class Hot:
    history: list[Message]  # the archive's last `depth` messages, or all of them if `whole`
    depth: int
    whole: bool
    summary: str
    meta: ChatMeta
    facts: list[str]
    # facts.json as it was when read (smallfiles.facts_signature): a `membot mcp` beside the
    # bot may change the facts, the one write that is not this backend's own.
    facts_seen: tuple[int, int, int] | None = None


@dataclass(frozen=True, slots=True)
class Kept:
    """What this process keeps of a conversation before an append, true by its own writes
    (the context above, delivery.py KnownRecords), so the append's worker thread does not
    read it again: the archive's last message (None for an empty archive, UNREAD: read it),
    meta as `load_meta` reads it (None: read it) and the delivery record. Each read
    spared is a few system calls, after each of which a worker thread waits for the
    interpreter while the event loop holds it, and a line or a file parsed."""

    last: Message | Unread | None = UNREAD
    meta: ChatMeta | None = None
    record: Known = UNKNOWN

    @classmethod
    def of(cls, hot: Hot | None, record: Known) -> Kept:
        if hot is None:
            return cls(record=record)
        return cls(
            last=hot.history[-1] if hot.history else (None if hot.whole else UNREAD),
            # A meta rebuilt in memory (none on disk yet) is read again (hot.py `appended`).
            meta=hot.meta if hot.meta.created_at is not None else None,
            record=record,
        )


class HotContexts:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[ConversationId, Hot] = OrderedDict()

    def get(
        self, cid: ConversationId, limit: int, facts_now: Callable[[], object]
    ) -> ChatContext | None:
        """The context, if kept, deep enough for `limit` messages and its facts still what
        `facts_now()` finds. Copies of what the caller could change: the kept one must stay
        what is on disk."""
        hot = self._entries.get(cid)
        if hot is None or (limit > hot.depth and not hot.whole):
            return None
        if facts_now() != hot.facts_seen:
            del self._entries[cid]
            return None
        self._entries.move_to_end(cid)
        return ChatContext(
            history=hot.history[-limit:] if limit > 0 else [],
            summary=hot.summary,
            meta=replace(hot.meta),
            facts=list(hot.facts),
        )

    def put(
        self,
        cid: ConversationId,
        context: ChatContext,
        limit: int,
        facts_seen: tuple[int, int, int] | None,
    ) -> None:
        """Keep a context just read from disk with `limit` messages asked for, its facts
        read from facts.json as `facts_seen` found it."""
        if limit <= 0:
            return  # no history read: nothing it could answer later without the disk
        depth = limit
        self._keep(
            cid,
            Hot(
                history=list(context.history),
                depth=depth,
                whole=len(context.history) < depth,
                summary=context.summary,
                meta=replace(context.meta),
                facts=list(context.facts),
                facts_seen=facts_seen,
            ),
        )

    def peek(self, cid: ConversationId) -> Hot | None:
        """The kept context as it is (the caller copies what it hands on), facts unchecked:
        for its summary and meta, which only this backend writes."""
        return self._entries.get(cid)

    def restore(self, cid: ConversationId, hot: Hot) -> None:
        """Keep `hot` again (popped before a write), as that write left it."""
        self._keep(cid, hot)

    def pop(self, cid: ConversationId) -> Hot | None:
        """Forget a conversation's context (a write is about to change it)."""
        return self._entries.pop(cid, None)

    def appended(self, cid: ConversationId, hot: Hot, stored: Sequence[Message]) -> None:
        """Keep `hot` (popped before the append) with the messages the append stored, and
        meta as the backend now reads it: counters, the turn's state, its time."""
        if not stored or hot.meta.created_at is None:
            # A meta rebuilt in memory (none on disk yet): its generation is not the one the
            # append just wrote. Read it again.
            return
        history = hot.history + list(stored)
        whole = hot.whole and len(history) <= hot.depth
        meta = replace(hot.meta)
        last = stored[-1]
        meta.messages_total = last.seq
        meta.adopt_turn_state(last)
        if meta.updated_at is None or last.ts > meta.updated_at:
            meta.updated_at = last.ts
        self._keep(
            cid,
            replace(hot, history=history[-hot.depth :], whole=whole, meta=meta),
        )

    def _keep(self, cid: ConversationId, hot: Hot) -> None:
        self._entries[cid] = hot
        self._entries.move_to_end(cid)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def read_context(
    directory: Path, cid: ConversationId, limit: int
) -> tuple[tuple[int, int, int] | None, ChatContext]:
    """A conversation's context read from its directory (blocking: a worker thread), with
    facts.json's signature as it was just before the facts were read (a change after it is
    seen by the next turn)."""
    history = read_tail(directory / MESSAGES, max(limit, 1))
    meta = load_meta(directory, cid, last=history[-1] if history else None, known=True)
    seen = facts_signature(directory)
    return seen, ChatContext(
        history=history[-limit:] if limit > 0 else [],
        summary=read_text(directory / SUMMARY),
        meta=meta,
        facts=[f["text"] for f in read_facts(directory / FACTS)],
    )
