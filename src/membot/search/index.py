"""Ranked search over a chat's whole archive: SQLite FTS5 (BM25) over stemmed text.

The index is a cache of messages.txt, never a source of truth: index_root/<the
conversation's relative path>/search.sqlite3 holds the stems (FTS5), the original messages
to show, and how far it got.
Each search first indexes whatever was appended since, so nothing has to hook into the
write path; a chat that was reset, or an index that is damaged, is rebuilt from the archive.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path

from membot.ids import ConversationId
from membot.locks import KeyedLocks
from membot.memory.contract.models import Message
from membot.memory.contract.repository import ChatRepository
from membot.search.db import delete_index, is_damage
from membot.search.excerpts import CANDIDATES, DEFAULT_BUDGET_TOKENS, Excerpt, gather
from membot.search.hits import SearchHit
from membot.search.store import index_summary, insert, prepare, query
from membot.search.text import match_expression
from membot.textcut import chunk_text

log = logging.getLogger(__name__)

INDEX_FILE = "search.sqlite3"
MAX_LIMIT = 50
# Messages per write transaction: big enough to amortize the commit, small enough that an
# interrupted first build of a long archive keeps most of its progress.
_BATCH = 2000

#: A document's text is searched in pieces about this long (a hit shows one piece), by the
#: bot and by `membot search` alike.
CHUNK_CHARS = 600

#: Long text in pieces for the index (tests may cut otherwise).
Chunker = Callable[[str], list[str]]


class HistorySearch:
    """Searches each chat's whole message archive, keeping one index file per chat."""

    def __init__(
        self, repository: ChatRepository, index_root: Path | str, chunker: Chunker | None = None
    ) -> None:
        self._repository = repository
        self._root = Path(index_root)
        self._chunker = chunker or _pieces
        self._lock = KeyedLocks()

    def index_path(self, cid: ConversationId) -> Path:
        # A validated id is the only way to a path: it never comes from user text.
        return self._root / cid.relative_path() / INDEX_FILE

    async def search(
        self,
        cid: ConversationId,
        query: str,
        limit: int = 5,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[SearchHit]:
        """The best `limit` (1..50) rows of the chat for `query`, best first by relevance
        (not recency): messages, documents' pieces, summaries and facts (SearchHit.kind).
        since (inclusive) / until (exclusive): only rows dated in that period."""
        path = self.index_path(cid)
        match = match_expression(query)
        if match is None:
            return []
        limit = max(1, min(int(limit), MAX_LIMIT))
        period = (since, until)
        started = time.perf_counter()
        async with self._lock(cid):
            try:
                hits = await self._search_locked(cid, path, match, limit, period)
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                log.warning(
                    "%s: search index is damaged (%s); rebuilding it",
                    cid,
                    exc.sqlite_errorname,
                )
                await asyncio.to_thread(delete_index, path)
                hits = await self._search_locked(cid, path, match, limit, period)
        log.debug(
            "%s: search returned %d hits in %.1f ms",
            cid,
            len(hits),
            (time.perf_counter() - started) * 1000,
        )
        return hits

    async def recall(
        self,
        cid: ConversationId,
        query: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    ) -> list[Excerpt]:
        """The best hits for `query` (in since..until, as `search`) with their neighbours,
        merged into excerpts that stay within `budget_tokens` (excerpts.py), best first."""
        match = match_expression(query)
        hits = await self.search(cid, query, CANDIDATES, since=since, until=until)
        if match is None or not hits:
            return []
        async with self._lock(cid):  # not read while a reset drops the file
            path = self.index_path(cid)
            return await asyncio.to_thread(
                partial(gather, since=since, until=until), path, hits, match, budget_tokens
            )

    async def drop(self, cid: ConversationId) -> None:
        """Delete the chat's index (on reset). Safe when there is none."""
        path = self.index_path(cid)
        async with self._lock(cid):
            await asyncio.to_thread(delete_index, path)

    async def rebuild(self, cid: ConversationId) -> None:
        """Build the chat's index anew from the archive (after /forget). The old file is
        deleted with its -wal and -shm, not emptied: no page of it keeps what was forgotten."""
        path = self.index_path(cid)
        async with self._lock(cid):
            await asyncio.to_thread(delete_index, path)
            await self._refreshed(cid, path)

    async def _search_locked(
        self,
        cid: ConversationId,
        path: Path,
        match: str,
        limit: int,
        period: tuple[datetime | None, datetime | None],
    ) -> list[SearchHit]:
        if not await self._refreshed(cid, path):
            return []
        return await asyncio.to_thread(query, path, match, limit, *period)

    async def refresh(self, cid: ConversationId) -> None:
        """Index what was appended since the last search now (after an /import of thousands
        of messages), so that the next search does not wait for it."""
        path = self.index_path(cid)
        async with self._lock(cid):
            try:
                await self._refreshed(cid, path)
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                await asyncio.to_thread(delete_index, path)
                await self._refreshed(cid, path)

    async def _refreshed(self, cid: ConversationId, path: Path) -> bool:
        """The index brought up to the archive; False when the chat has nothing stored."""
        meta = await self._repository.get_meta(cid)
        if meta.messages_total == 0:
            # Nothing stored (never, or since a reset): nothing to find, and no index file
            # should bring an unknown chat's directory into existence.
            await asyncio.to_thread(delete_index, path)
            return False
        # A reset conversation starts a new generation: the old index is of a dead past.
        generation = meta.generation
        state = await asyncio.to_thread(prepare, path, cid, generation, meta.messages_total)
        if state.last_seq < meta.messages_total:
            # Checked first because even a bisecting seek into a long archive costs a few ms.
            await self._catch_up(cid, path, state.last_seq)
        if meta.summarized_upto > state.summary_upto:
            # A summary made since the last search: a snapshot of what it added (entries.py).
            summary = await self._repository.get_summary(cid)
            await asyncio.to_thread(index_summary, path, summary, meta.summarized_upto)
        return True

    async def _catch_up(self, cid: ConversationId, path: Path, last_seq: int) -> None:
        started = time.perf_counter()
        added = 0
        batch: list[Message] = []
        chunks: dict[int, list[str]] = {}
        async for message in self._repository.iter_messages(cid, after_seq=last_seq):
            # Never between a tool call and its results: a `remember` result says whether
            # the fact was kept (entries.py reads both from one batch).
            if len(batch) >= _BATCH and message.role != "tool":
                added += await asyncio.to_thread(insert, path, batch, chunks)
                batch, chunks = [], {}
            batch.append(message)
            if message.attachments:
                chunks.update(await self._documents(cid, message))
        if batch:
            added += await asyncio.to_thread(insert, path, batch, chunks)
        if added:
            log.debug(
                "%s: indexed %d messages in %.1f ms",
                cid,
                added,
                (time.perf_counter() - started) * 1000,
            )

    async def _documents(self, cid: ConversationId, message: Message) -> dict[int, list[str]]:
        """The text of the documents a message brought, in pieces labelled with their name
        (read from the conversation's files; one that is gone is not indexed)."""
        pieces: list[str] = []
        for attachment in message.attachments:
            if attachment.kind != "document" or attachment.file is None:
                continue
            data = await self._repository.get_file(cid, attachment.file)
            if data is None:
                continue
            label = f"[{attachment.name or 'document'}]"
            # A document may have 20 MB of text: decoded and cut in a thread, not the loop.
            chunks = await asyncio.to_thread(_chunked, self._chunker, data)
            pieces += [f"{label} {piece}" for piece in chunks]
        return {message.seq: pieces} if pieces else {}


def _chunked(chunker: Chunker, data: bytes) -> list[str]:
    return chunker(data.decode("utf-8", errors="replace"))


def _pieces(text: str) -> list[str]:
    return chunk_text(text, CHUNK_CHARS)
