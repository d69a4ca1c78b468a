"""What /import brought into a chat's archive, as the window and the summary see it: not at all.

An import is one append (core/importer.py), so its messages are one stretch of seqs, kept in
the conversation's state (`ConversationState.imported`) by that same append. The window and
the summary count only the chat's own messages: each is given the seq it would have without
the imports (`Spans.own_seq`), the window's rules (core/window.py) run on those, and the
stretches are stepped over with `iter_messages` from the seq after each, never read. The
search indexes everything, imported messages too, with their original dates.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from membot.core.window import WindowPolicy
from membot.ids import ConversationId
from membot.memory.contract.models import ChatContext, ChatMeta, Message
from membot.memory.contract.repository import ChatRepository


@dataclass(frozen=True, slots=True)
class Spans:
    """The imported stretches of an archive, (first seq, last seq), oldest first."""

    spans: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, meta: ChatMeta) -> Spans:
        return cls(tuple(sorted(meta.state.imported)))

    def count(self, after: int, upto: int) -> int:
        """How many imported seqs are in (after, upto]."""
        return sum(
            max(0, min(last, upto) - max(first, after + 1) + 1) for first, last in self.spans
        )

    def own_seq(self, seq: int) -> int:
        """The seq a chat's own message would have without the imports."""
        return seq - self.count(0, seq)

    def own_stretches(self, after: int, upto: int | None) -> list[tuple[int, int | None]]:
        """The chat's own stretches of seqs in (after, upto] (None: to the end), oldest first."""
        stretches: list[tuple[int, int | None]] = []
        start = after + 1
        for first, last in self.spans:
            if last < start:
                continue
            if upto is not None and first > upto:
                break
            if first > start:
                stretches.append((start, first - 1))
            start = last + 1
        if upto is None or start <= upto:
            stretches.append((start, upto))
        return stretches


async def _stretch(
    repository: ChatRepository, cid: ConversationId, first: int, last: int | None
) -> AsyncGenerator[Message, None]:
    async with contextlib.aclosing(repository.iter_messages(cid, after_seq=first - 1)) as it:
        async for message in it:
            if last is not None and message.seq > last:
                break
            if message.origin is None:
                yield message


async def own_messages(
    repository: ChatRepository, cid: ConversationId, after: int, spans: Spans
) -> AsyncGenerator[Message, None]:
    """The chat's own messages after seq `after`, oldest first, imported stretches skipped."""
    for first, last in spans.own_stretches(after, None):
        async for message in _stretch(repository, cid, first, last):
            yield message


async def own_history(repository: ChatRepository, ctx: ChatContext, read: int) -> list[Message]:
    """The chat's own last `read` messages after its summary, from the context's tail and, if
    imports fill that tail, from the own stretches before it (read from their ends)."""
    own = [m for m in ctx.history if m.origin is None]
    spans = Spans.of(ctx.meta)
    if not spans.spans or len(ctx.history) < read or not ctx.history:
        return own  # no import, or the tail reached the archive's start
    cid = ctx.meta.conversation
    need = read - len(own)
    older: list[Message] = []
    stretches = spans.own_stretches(ctx.meta.summarized_upto, ctx.history[0].seq - 1)
    for first, last in reversed(stretches):
        if need <= 0 or last is None:
            break
        got = [m async for m in _stretch(repository, cid, max(first, last - need + 1), last)]
        older = got + older
        need -= len(got)
    return older + own


def own_window(policy: WindowPolicy, meta: ChatMeta, history: Sequence[Message]) -> list[Message]:
    """`policy.window` over the chat's own messages, counted as if nothing were imported."""
    spans = Spans.of(meta)
    if not spans.spans:
        return policy.window(meta.summarized_upto, history)
    by_own = {spans.own_seq(m.seq): m for m in history if m.origin is None}
    numbered = [replace(m, seq=seq) for seq, m in by_own.items()]
    shown = policy.window(spans.own_seq(meta.summarized_upto), numbered)
    return [by_own[m.seq] for m in shown]


async def window_of(
    repository: ChatRepository, policy: WindowPolicy, ctx: ChatContext
) -> list[Message]:
    """The turn's window: the chat's own messages after the summary. Imported messages
    (/import) are searched, never shown in the window."""
    return own_window(policy, ctx.meta, await own_history(repository, ctx, policy.read))


class Due(Protocol):
    def due(self, messages_total: int, summarized_upto: int) -> bool: ...


def summary_due(summarizer: Due, meta: ChatMeta, last_seq: int) -> bool:
    """Whether a summary is due after a turn stored through `last_seq`, in own messages."""
    own = Spans.of(meta).own_seq
    return summarizer.due(own(last_seq), own(meta.summarized_upto))
