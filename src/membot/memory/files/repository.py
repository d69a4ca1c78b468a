"""The embedded default backend: one directory of plain files per conversation.

DATA_DIR/<chat id>/ for Telegram chats, DATA_DIR/<namespace>/<key>/ for the others
(`ConversationId.relative_path()`):
    messages.txt    JSON Lines, append-only (rewritten whole only to forget: forget.py); the
                    source of truth for the archive
    summary.txt     the current rolling summary (replaced atomically)
    summaries.log   JSON Lines: every summary made, with its time and the seq range it covers
    meta.json       counters, timestamps, generation, state (replaced atomically)
    facts.json      facts the user asked to keep (replaced atomically)
    undelivered.json  which stored answers may not have been sent: one record, rewritten in
                    place (delivery.py)
    files/<key>     the conversation's files: images, documents' text (memory/contract/attachment.py
                    names them; each written atomically and synced before the turn that
                    refers to it is appended)

All blocking file work runs in worker threads, never in the event loop. Appends are one
`write()` of whole lines on an O_APPEND descriptor followed by fdatasync, so a kill -9 can
at worst leave one torn last line, which readers skip and the next append terminates.
A turn's state change rides on the turn's last line, so the two are one write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar, cast

from membot.durable import (
    fdatasync,
    fsync_dir,
    open_append,
    write_all,
)
from membot.ids import ConversationId
from membot.locks import KeyedLocks
from membot.memory.contract.attachment import check_file_key
from membot.memory.contract.models import ChatContext, ChatMeta, Message, Summary
from membot.memory.contract.state import ConversationState
from membot.memory.files.archive import (
    ForwardReader,
    last_of,
    read_tail,
    read_text,
)
from membot.memory.files.delivery import (
    End,
    FileDeliveries,
    KnownRecords,
    Record,
    follow,
    identity,
    mark_pending,
)
from membot.memory.files.forget import FileForget
from membot.memory.files.hot import Hot, HotContexts, Kept, read_context
from membot.memory.files.layout import (
    FILES,
    MESSAGES,
    SUMMARY,
    listing,
    load_meta,
    meta_after_append,
    put_file,
    read_file,
    remove,
)
from membot.memory.files.layout import save_summary as write_summary
from membot.memory.files.layout import set_state as write_state
from membot.memory.files.smallfiles import (
    FACTS,
    add_fact,
    facts_signature,
    read_facts,
    remove_facts,
)

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class FileRepository(FileDeliveries, FileForget):
    """ChatRepository over plain files. Single-process: locks are per conversation."""

    def __init__(self, data_dir: Path | str) -> None:
        self.root = Path(data_dir)
        self._lock = KeyedLocks()
        self._hot = HotContexts()  # recent contexts, kept true by the writes below
        self._records = KnownRecords()  # delivery records, likewise

    def conversation_dir(self, cid: ConversationId) -> Path:
        return self.root / cid.relative_path()

    # -- reading -------------------------------------------------------------------------

    async def tail(self, cid: ConversationId, limit: int) -> list[Message]:
        if limit <= 0:
            return []
        return await asyncio.to_thread(read_tail, self.conversation_dir(cid) / MESSAGES, limit)

    async def context(self, cid: ConversationId, limit: int) -> ChatContext:
        directory = self.conversation_dir(cid)
        # One stat in the event loop, not a thread's hop: facts `membot mcp` changed are read.
        found = self._hot.get(cid, limit, lambda: facts_signature(directory))
        if found is not None:
            return found
        # Under the lock: no write may land between the read and keeping what it read.
        async with self._lock(cid):
            seen, context = await asyncio.to_thread(read_context, directory, cid, limit)
            self._hot.put(cid, context, limit, seen)
        return context

    async def iter_messages(
        self, cid: ConversationId, after_seq: int = 0
    ) -> AsyncGenerator[Message, None]:
        # A summary reads the messages after the last summarized one, the outbox the answers
        # after its mark: mostly within the context kept in memory, which is the archive's
        # tail (read with no thread's hop and no line parsed).
        hot = self._hot.peek(cid)
        if hot is not None and (hot.whole or (hot.history and hot.history[0].seq <= after_seq + 1)):
            for message in [m for m in hot.history if m.seq > after_seq]:
                yield message
            return
        reader = ForwardReader(self.conversation_dir(cid) / MESSAGES, after_seq=after_seq)
        try:
            while not reader.done and (batch := await asyncio.to_thread(reader.next_batch)):
                for message in batch:
                    yield message
        finally:
            reader.close()

    # A context kept in memory answers these without a thread's hop (memory/files/hot.py).

    async def get_summary(self, cid: ConversationId) -> str:
        if (hot := self._hot.peek(cid)) is not None:
            return hot.summary
        return await asyncio.to_thread(read_text, self.conversation_dir(cid) / SUMMARY)

    async def get_meta(self, cid: ConversationId) -> ChatMeta:
        if (hot := self._hot.peek(cid)) is not None:
            return replace(hot.meta)
        return await asyncio.to_thread(load_meta, self.conversation_dir(cid), cid)

    async def get_facts(self, cid: ConversationId) -> list[str]:
        directory = self.conversation_dir(cid)
        # One stat in the event loop: facts `membot mcp` changed are read.
        found = self._hot.get(cid, 0, lambda: facts_signature(directory))
        if found is not None:
            return found.facts
        return [f["text"] for f in await asyncio.to_thread(read_facts, directory / FACTS)]

    async def conversations(self, namespace: str) -> list[ConversationId]:
        return await asyncio.to_thread(listing, self.root, namespace)

    # -- writing -------------------------------------------------------------------------

    async def append(
        self,
        cid: ConversationId,
        messages: Sequence[Message],
        state: ConversationState | None = None,
    ) -> list[Message]:
        if not messages:
            return []
        if state is not None:
            messages = [*messages[:-1], replace(messages[-1], state=state)]
        stored, _, _ = await self._write(cid, self._append_sync, cid, messages, appends=True)
        return stored

    async def save_summary(
        self, cid: ConversationId, text: str, covers_from: int, covers_to: int, generation: str
    ) -> bool:
        summary = Summary(text=text, covers_from=covers_from, covers_to=covers_to)

        def saved(hot: Hot, meta: ChatMeta | None) -> Hot | None:
            return None if meta is None else replace(hot, summary=text, meta=replace(meta))

        meta = await self._write(
            cid, write_summary, self.conversation_dir(cid), cid, summary, generation, keeps=saved
        )
        return meta is not None

    async def set_state(self, cid: ConversationId, state: ConversationState) -> ChatMeta:
        return await self._write(cid, write_state, self.conversation_dir(cid), cid, state)

    async def add_fact(self, cid: ConversationId, fact: str, limit: int) -> bool | None:
        return await self._write(cid, add_fact, self.conversation_dir(cid), fact, limit)

    async def remove_facts(self, cid: ConversationId, facts: Sequence[str]) -> list[str]:
        return await self._write(cid, remove_facts, self.conversation_dir(cid), list(facts))

    async def put_file(self, cid: ConversationId, key: str, data: bytes) -> None:
        path = self.conversation_dir(cid) / FILES / check_file_key(key)
        # Under the conversation's lock, so a reset cannot run beside it and leave it behind.
        await self._write(cid, put_file, self.root, path, bytes(data))

    async def get_file(self, cid: ConversationId, key: str) -> bytes | None:
        path = self.conversation_dir(cid) / FILES / check_file_key(key)
        return await asyncio.to_thread(read_file, path)

    async def reset(self, cid: ConversationId) -> None:
        await self._write(cid, remove, self.root, self.conversation_dir(cid), cid)

    async def _write(
        self,
        cid: ConversationId,
        fn: Callable[..., _T],
        *args: Any,
        appends: bool = False,
        keeps: Callable[[Hot, _T], Hot | None] | None = None,
    ) -> _T:
        """Run a write in a worker thread under the conversation's lock, until it is done.
        The context and the delivery record kept in memory are dropped first (a failed or
        cancelled write leaves them unknown); an append's messages are added to the context
        afterwards, and the record it leaves is kept; `keeps` says what other writes leave
        of the context (None: dropped).

        A cancelled caller (a /reset stopping a summary, a shutdown) cannot stop the thread, so
        the lock is held until the thread finishes: otherwise a reset could run beside a
        summary still being written and find it back on disk afterwards.
        """
        async with self._lock(cid):
            hot = self._hot.pop(cid)
            record = self._records.get(cid)
            self._records.drop(cid)
            if appends:  # what it need not read again
                args = (*args, Kept.of(hot, record))
            work = asyncio.ensure_future(asyncio.to_thread(fn, *args))
            try:
                result = await asyncio.shield(work)
            except asyncio.CancelledError:
                while not work.done():
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait({work})
                raise
            if appends:
                stored, after, end = cast("tuple[list[Message], Record | None, End]", result)
                self._records.put(cid, after, end)
                if hot is not None:
                    self._hot.appended(cid, hot, stored)
            elif keeps is not None and hot is not None and (kept := keeps(hot, result)):
                self._hot.restore(cid, kept)
            return result

    async def close(self) -> None:
        return None

    # -- sync internals (worker threads) --------------------------------------------------

    def _append_sync(
        self, cid: ConversationId, messages: Sequence[Message], kept: Kept
    ) -> tuple[list[Message], Record | None, End]:
        """The messages stored, the chat's delivery record afterwards and the archive's end
        (its last seq, and what it is) after the write."""
        directory = self.conversation_dir(cid)
        path = directory / MESSAGES
        new_dir = not directory.is_dir()
        fd = open_append(path)
        if new_dir:
            # The conversation's first turn: its directory entries must be durable too.
            for parent in {directory.parent, self.root}:
                fsync_dir(parent)
        try:
            # One descriptor for all of it: the last seq, the torn-line check, the append.
            last, torn, st = last_of(fd, path, kept.last)
            size, before = st.st_size, identity(st)
            seq = last.seq if last else 0
            stored = [replace(m, seq=seq + i) for i, m in enumerate(messages, 1)]
            to_send = any(m.delivery is not None for m in stored)
            record: Record | None = None
            if to_send:  # before the answer is there to be missed
                record = mark_pending(directory, seq, before, kept.record)
            payload = "".join(m.to_json() + "\n" for m in stored).encode()
            if torn:
                # A crash tore the last line: end it so our first line starts clean.
                log.warning("%s: terminating a torn last line in %s", cid, MESSAGES)
                payload = b"\n" + payload
            write_all(fd, payload)
            fdatasync(fd)
            after = identity(os.fstat(fd))
        finally:
            os.close(fd)
        if not to_send:
            record = follow(directory, before, after, stored[-1].seq, kept.record)
        if size == 0:
            # A new file: its directory entry must be durable too, like its first lines.
            fsync_dir(directory)
        meta_after_append(directory, cid, last, stored, new_file=size == 0, meta=kept.meta)
        return stored, record, (stored[-1].seq, after)
