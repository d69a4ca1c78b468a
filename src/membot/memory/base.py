"""The one storage contract every memory backend implements."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Protocol, runtime_checkable

from membot.memory.models import ChatContext, ChatMeta, Message


@runtime_checkable
class ChatRepository(Protocol):
    """A chat's memory: an append-only message archive, a rolling summary and meta.

    Chat ids are integers (Telegram's); a backend derives every key or path from them alone.
    All methods are safe to call concurrently for the same chat from one process.
    """

    async def tail(self, chat_id: int, limit: int) -> list[Message]:
        """The last `limit` messages, oldest first. Cost must not grow with the archive."""
        ...

    async def context(self, chat_id: int, limit: int) -> ChatContext:
        """The last `limit` messages, the summary and meta, read together for one turn."""
        ...

    async def append(self, chat_id: int, messages: Sequence[Message]) -> list[Message]:
        """Durably append messages as one unit; return them with their assigned `seq`.

        When this returns, the messages survive a crash of the process.
        """
        ...

    def iter_messages(self, chat_id: int, after_seq: int = 0) -> AsyncGenerator[Message, None]:
        """Stored messages with `seq > after_seq`, oldest first (archive search, export).

        Streams, never loads the archive; finding `after_seq` must not read everything before it.
        A generator, so a reader that stops early can `aclose()` it and release the file.
        """
        ...

    async def get_summary(self, chat_id: int) -> str:
        """The current summary, or "" when there is none."""
        ...

    async def save_summary(self, chat_id: int, text: str, covers_from: int, covers_to: int) -> None:
        """Replace the summary atomically, log it, and mark messages up to `covers_to` covered."""
        ...

    async def get_meta(self, chat_id: int) -> ChatMeta:
        """Counters, timestamps and settings; a fresh ChatMeta for an unknown chat."""
        ...

    async def update_settings(self, chat_id: int, **settings: object) -> ChatMeta:
        """Merge per-chat settings into meta (None removes a key)."""
        ...

    async def get_facts(self, chat_id: int) -> list[str]:
        """The long-term facts the user asked the bot to keep, oldest first."""
        ...

    async def add_fact(self, chat_id: int, fact: str) -> bool:
        """Keep a fact; False when an identical fact (ignoring case) is already kept."""
        ...

    async def remove_facts(self, chat_id: int, facts: Sequence[str]) -> list[str]:
        """Drop these exact facts; return the ones that were removed."""
        ...

    async def reset(self, chat_id: int) -> None:
        """Forget everything about the chat: messages, summary, meta and facts."""
        ...

    async def close(self) -> None:
        """Release connections and files."""
        ...
