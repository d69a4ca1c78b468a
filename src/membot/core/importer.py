"""/import: another assistant's conversations (a ChatGPT or Claude export) brought into a
chat's memory, searchable with their original dates and roles, never replayed into the window
or the summary (core/imported.py).

All or nothing: the export is read whole first (membot.imports, in a worker thread), and its
new messages are one `append`, with the state that records their stretch of seqs, so a crash
leaves either all of them or none. Each message carries its `origin` ("chatgpt:<conversation
id>:<message id>"); the origins already imported are read from the recorded stretches only
(never the chat's own messages), so the same export sent again, as a ZIP or its JSON, adds
nothing. The caller holds the chat's turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from membot.core.imported import Spans
from membot.errors import MembotError
from membot.ids import ConversationId
from membot.imports import Thread, read_export
from membot.memory.contract.models import Message
from membot.memory.contract.repository import ChatRepository, StorageUnavailable
from membot.tasks import to_the_end

if TYPE_CHECKING:
    from membot.search import HistorySearch

log = logging.getLogger(__name__)


class TooManyToImport(MembotError, ValueError):
    """More messages than the storage keeps for a chat (REDIS_MAX_MESSAGES)."""

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(f"{count} messages, over {limit}")
        self.count = count
        self.limit = limit


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import added: conversations and messages, and their dates."""

    conversations: int = 0
    messages: int = 0
    first: datetime | None = None
    last: datetime | None = None


class Importer:
    """Brings exports into chats. `max_messages`: the most a chat keeps (Redis trims beyond
    it), less `keep` of its own; None: no bound (files)."""

    def __init__(
        self,
        repository: ChatRepository,
        *,
        search: HistorySearch | None = None,
        max_messages: int | None = None,
        keep: int = 0,
    ) -> None:
        self.repository = repository
        # The chats' archive search: an import is indexed before its answer, so the first
        # search after it does not wait for thousands of messages.
        self.search = search
        self.max_messages = max_messages
        self.keep = keep

    async def run(self, cid: ConversationId, path: Path, max_bytes: int) -> ImportReport:
        """Import the export at `path`. Raises membot.imports' NotAnExport, BrokenExport or
        ExportTooBig (nothing stored), TooManyToImport, or StorageUnavailable."""
        threads = await asyncio.to_thread(read_export, path, max_bytes)
        meta = await self.repository.get_meta(cid)
        if meta.degraded:  # its state is a stand-in: the stretches it records are unknown
            raise StorageUnavailable(f"{cid}: cannot import while the storage is unreachable")
        spans = Spans.of(meta)
        known = await self._known(cid, spans)
        messages, conversations = await asyncio.to_thread(_new_messages, threads, known)
        if not messages:
            log.info("%s: import of %d conversations added nothing new", cid, len(threads))
            return ImportReport()
        if self.max_messages is not None and len(messages) > self.max_messages - self.keep:
            raise TooManyToImport(len(messages), self.max_messages - self.keep)
        first = meta.messages_total + 1
        span = (first, first + len(messages) - 1)
        state = replace(meta.state, imported=(*meta.state.imported, span))
        stored = await to_the_end(self.repository.append(cid, messages, state=state))
        if stored[0].seq != first:  # not expected: the caller holds the chat's turn
            state = replace(meta.state, imported=(*meta.state.imported, _span(stored)))
            await self.repository.set_state(cid, state)
        log.info("%s: imported %d messages in %d conversations", cid, len(stored), conversations)
        if self.search is not None:
            try:
                await self.search.refresh(cid)
            except (sqlite3.Error, OSError) as exc:  # kept all the same: a search catches up
                log.warning("%s: the import is not indexed yet (%s)", cid, type(exc).__name__)
        dates = [m.ts for m in messages]
        return ImportReport(conversations, len(messages), min(dates), max(dates))

    async def _known(self, cid: ConversationId, spans: Spans) -> set[str]:
        """The origins imported before: only the recorded stretches are read."""
        known: set[str] = set()
        for first, last in spans.spans:
            async with contextlib.aclosing(
                self.repository.iter_messages(cid, after_seq=first - 1)
            ) as messages:
                async for message in messages:
                    if message.seq > last:
                        break
                    if message.origin is not None:
                        known.add(message.origin)
        return known


def _span(stored: Sequence[Message]) -> tuple[int, int]:
    return (stored[0].seq, stored[-1].seq)


def _new_messages(threads: Sequence[Thread], known: set[str]) -> tuple[list[Message], int]:
    """The messages not imported before, conversation after conversation in the order they
    began; and how many conversations they are in."""
    messages: list[Message] = []
    conversations = 0
    for thread in sorted(threads, key=lambda t: t.messages[0].ts):
        before = len(messages)
        for said in thread.messages:
            if said.origin in known:
                continue
            known.add(said.origin)  # one export naming a message twice keeps it once
            messages.append(
                Message(
                    role=said.role,
                    content=said.text,
                    ts=said.ts,
                    name=thread.label,
                    origin=said.origin,
                )
            )
        conversations += len(messages) > before
    return messages, conversations
