"""The one storage contract every memory backend implements."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Protocol, runtime_checkable

# The storage's failure, named where the contract is (membot/redis/errors.py raises it).
from membot.errors import StorageUnavailable as StorageUnavailable
from membot.ids import ConversationId
from membot.memory.contract.delivery import DeliveryMark
from membot.memory.contract.models import ChatContext, ChatMeta, Message
from membot.memory.contract.state import ConversationState


@runtime_checkable
class CheckedAtStart(Protocol):
    """A backend with something to check at start-up (Redis: reachable, persisting)."""

    async def check(self) -> bool: ...


@runtime_checkable
class ChatRepository(Protocol):
    """A conversation's memory: an append-only message archive, a rolling summary, facts,
    meta and the conversation's state.

    Conversations are named by `ConversationId`; a backend derives every key or path from
    it alone (`ConversationId.relative_path()`, `str(cid)`). All methods are safe to call
    concurrently for the same conversation from one process.
    """

    async def tail(self, cid: ConversationId, limit: int) -> list[Message]:
        """The last `limit` messages, oldest first. Cost must not grow with the archive."""
        ...

    async def context(self, cid: ConversationId, limit: int) -> ChatContext:
        """The last `limit` messages, the summary, facts and meta, read together for a turn."""
        ...

    async def append(
        self,
        cid: ConversationId,
        messages: Sequence[Message],
        state: ConversationState | None = None,
    ) -> list[Message]:
        """Durably append messages as one unit; return them with their assigned `seq`.

        `state`, when given, becomes the conversation's state in the same step: either the
        turn and its state are both kept, or neither. When this returns, both survive a
        crash of the process. A message with a `delivery` (an answer still to be sent) also
        leaves the conversation a delivery mark, in the same step, unless it has one.
        """
        ...

    def iter_messages(
        self, cid: ConversationId, after_seq: int = 0
    ) -> AsyncGenerator[Message, None]:
        """Stored messages with `seq > after_seq`, oldest first (archive search, export).

        Streams, never loads the archive; finding `after_seq` must not read everything before it.
        A generator, so a reader that stops early can `aclose()` it and release the file.
        """
        ...

    async def undelivered(self, namespace: str) -> list[ConversationId]:
        """The namespace's conversations that have a delivery mark: stored answers that may
        not have been sent. Cheap with many conversations: never reads an archive."""
        ...

    async def delivery_mark(self, cid: ConversationId) -> DeliveryMark | None:
        """The conversation's delivery mark; None when every stored answer was delivered.

        The seqs `append` returned name its messages for `mark_delivered` (the answer sent
        at once) until the mark is read: a resend reads it, then marks by the seqs it reads.
        A backend whose append may return provisional seqs (memory/outage/) maps them until
        then, never after."""
        ...

    async def mark_delivered(
        self, cid: ConversationId, upto: int, parts: int | None = None, sending: bool = False
    ) -> None:
        """`parts` None: the answer at seq `upto` was delivered (or given up), and every one
        before it; the mark is cleared when nothing was stored after it. Else progress: its
        first `parts` messages were, and (`sending`) the next one's request is out, so a
        resend starts after it. Nothing happens without a mark."""
        ...

    async def get_summary(self, cid: ConversationId) -> str:
        """The current summary, or "" when there is none."""
        ...

    async def save_summary(
        self, cid: ConversationId, text: str, covers_from: int, covers_to: int, generation: str
    ) -> bool:
        """Replace the summary atomically, log it, and mark messages up to `covers_to`
        covered; only if the conversation is still in `generation` (not reset since the
        summarizer read it). False when the summary was dropped."""
        ...

    async def get_meta(self, cid: ConversationId) -> ChatMeta:
        """Counters, timestamps, generation and state; a fresh ChatMeta for an unknown one."""
        ...

    async def set_state(self, cid: ConversationId, state: ConversationState) -> ChatMeta:
        """Change the conversation's state outside a turn (a cancelled consultation)."""
        ...

    async def get_facts(self, cid: ConversationId) -> list[str]:
        """The long-term facts the user asked the bot to keep, oldest first."""
        ...

    async def add_fact(self, cid: ConversationId, fact: str, limit: int) -> bool | None:
        """Keep a fact; False when an identical fact (ignoring case) is already kept, None
        when `limit` facts are kept already. The check and the write are one step."""
        ...

    async def remove_facts(self, cid: ConversationId, facts: Sequence[str]) -> list[str]:
        """Drop these exact facts; return the ones that were removed."""
        ...

    async def conversations(self, namespace: str) -> list[ConversationId]:
        """Every stored conversation of a namespace (the session sweep walks these)."""
        ...

    async def put_file(self, cid: ConversationId, key: str, data: bytes) -> None:
        """Keep a file of the conversation (an image, a document's text) under `key`, made
        by `memory.contract.attachment.new_file_key` (InvalidFileKey otherwise). Durable when it
        returns, readable by every process that may answer the conversation, and gone with
        the conversation (`reset`, and with Redis its TTL). A key put again is replaced."""
        ...

    async def get_file(self, cid: ConversationId, key: str) -> bytes | None:
        """The file kept under `key`, or None when there is none (never put, reset,
        expired). InvalidFileKey for a key that is not one."""
        ...

    async def forget(
        self,
        cid: ConversationId,
        seqs: Sequence[int],
        facts: Sequence[str] = (),
        summaries: Callable[[str], bool] | None = None,
    ) -> int:
        """Forget these messages for good (/forget); how many of them were there to forget.

        Each keeps its slot as a tombstone (`Message.tombstone`: seq, role, time, sender kept;
        its words, tool calls, sources and attachments gone), so seqs and `iter_messages`
        stay as they were; the files its attachments named are deleted; `facts` (exact texts)
        are dropped. Every summary made since the first of them (every one, when facts are dropped:
        a summary is made agreeing with the facts) is dropped (the log cut
        there, the summary before it current again, `summarized_upto` set back to what that
        one covered), so the summarizer makes them again from what remains; and the
        conversation gets a new generation, so a summary being made meanwhile is dropped and
        the search index is rebuilt. `summaries`: a summary whose text it holds true is dropped
        too, with every one made after it (the words may be left only there: REDIS_MAX_MESSAGES
        trimmed the messages they came from). Nothing changes when nothing is to go. Nothing
        of the forgotten text is left in the storage."""
        ...

    async def reset(self, cid: ConversationId) -> None:
        """Forget everything about the conversation: messages, summary, meta, state, facts,
        files, its delivery mark."""
        ...

    async def close(self) -> None:
        """Release connections and files."""
        ...
