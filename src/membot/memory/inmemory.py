"""A backend that keeps everything in this process's memory: for tests, benchmarks and
throw-away runs. Nothing survives the process; everything else about the
contract holds, so the contract test runs over it like over every other backend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field, replace

from membot.clock import utc_now
from membot.ids import ConversationId
from membot.memory.contract.attachment import check_file_key
from membot.memory.contract.delivery import DeliveryMark, progress
from membot.memory.contract.forgetting import summary_cut
from membot.memory.contract.models import ChatContext, ChatMeta, Message, Summary, new_generation
from membot.memory.contract.state import ConversationState


@dataclass
class _Conversation:
    meta: ChatMeta
    messages: list[Message] = field(default_factory=list)
    summary: str = ""
    summaries: list[Summary] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    mark: DeliveryMark | None = None


class MemoryRepository:
    """ChatRepository in a dict. Every method runs without awaiting in between its reads and
    writes, so each is atomic for the event loop; no locks are needed."""

    def __init__(self) -> None:
        self._data: dict[ConversationId, _Conversation] = {}

    def _get(self, cid: ConversationId) -> _Conversation | None:
        return self._data.get(cid)

    def _get_or_create(self, cid: ConversationId) -> _Conversation:
        conv = self._data.get(cid)
        if conv is None:
            now = utc_now()
            meta = ChatMeta(conversation=cid, generation=new_generation(), created_at=now)
            conv = self._data[cid] = _Conversation(meta=meta)
        return conv

    @staticmethod
    def _meta_copy(conv: _Conversation) -> ChatMeta:
        return replace(conv.meta)

    async def tail(self, cid: ConversationId, limit: int) -> list[Message]:
        conv = self._get(cid)
        return list(conv.messages[-limit:]) if conv and limit > 0 else []

    async def context(self, cid: ConversationId, limit: int) -> ChatContext:
        conv = self._get(cid)
        if conv is None:
            return ChatContext(history=[], summary="", meta=await self.get_meta(cid))
        return ChatContext(
            history=list(conv.messages[-limit:]) if limit > 0 else [],
            summary=conv.summary,
            meta=self._meta_copy(conv),
            facts=list(conv.facts),
        )

    async def append(
        self,
        cid: ConversationId,
        messages: Sequence[Message],
        state: ConversationState | None = None,
    ) -> list[Message]:
        if not messages:
            return []
        conv = self._get_or_create(cid)
        seq = conv.meta.messages_total
        stored = [replace(m, seq=seq + i) for i, m in enumerate(messages, 1)]
        if state is not None:
            stored[-1] = replace(stored[-1], state=state)
            conv.meta.state = state
            conv.meta.state_seq = stored[-1].seq
        conv.messages.extend(stored)
        if conv.mark is None and any(m.delivery is not None for m in stored):
            conv.mark = DeliveryMark(after=seq)
        conv.meta.messages_total = stored[-1].seq
        conv.meta.updated_at = utc_now()
        return stored

    async def iter_messages(
        self, cid: ConversationId, after_seq: int = 0
    ) -> AsyncGenerator[Message, None]:
        conv = self._get(cid)
        # A snapshot: a reset or an append while a reader walks it does not disturb it.
        for message in list(conv.messages if conv else ()):
            if message.seq > after_seq:
                yield message
                await asyncio.sleep(0)

    async def get_summary(self, cid: ConversationId) -> str:
        conv = self._get(cid)
        return conv.summary if conv else ""

    async def save_summary(
        self, cid: ConversationId, text: str, covers_from: int, covers_to: int, generation: str
    ) -> bool:
        conv = self._get(cid)
        if conv is None or conv.meta.generation != generation:
            return False
        summary = Summary(text=text, covers_from=covers_from, covers_to=covers_to)
        conv.summary = text.strip()
        conv.summaries.append(summary)
        conv.meta.summarized_upto = max(conv.meta.summarized_upto, covers_to)
        conv.meta.summaries_made += 1
        conv.meta.last_summary_at = summary.ts  # not updated_at: a summary is not activity
        return True

    async def get_meta(self, cid: ConversationId) -> ChatMeta:
        conv = self._get(cid)
        if conv is None:
            return ChatMeta(conversation=cid, generation=new_generation())
        return self._meta_copy(conv)

    async def set_state(self, cid: ConversationId, state: ConversationState) -> ChatMeta:
        conv = self._get_or_create(cid)
        conv.meta.state = state
        conv.meta.state_seq = conv.meta.messages_total
        conv.meta.updated_at = utc_now()
        return self._meta_copy(conv)

    async def get_facts(self, cid: ConversationId) -> list[str]:
        conv = self._get(cid)
        return list(conv.facts) if conv else []

    async def add_fact(self, cid: ConversationId, fact: str, limit: int) -> bool | None:
        conv = self._get_or_create(cid)
        if any(f.casefold() == fact.casefold() for f in conv.facts):
            return False
        if len(conv.facts) >= limit:
            return None
        conv.facts.append(fact)
        return True

    async def remove_facts(self, cid: ConversationId, facts: Sequence[str]) -> list[str]:
        conv = self._get(cid)
        if conv is None:
            return []
        removed = [f for f in conv.facts if f in facts]
        conv.facts = [f for f in conv.facts if f not in facts]
        return removed

    async def conversations(self, namespace: str) -> list[ConversationId]:
        return sorted(cid for cid in self._data if cid.namespace == namespace)

    async def undelivered(self, namespace: str) -> list[ConversationId]:
        return sorted(cid for cid, c in self._data.items() if cid.namespace == namespace and c.mark)

    async def delivery_mark(self, cid: ConversationId) -> DeliveryMark | None:
        conv = self._get(cid)
        return conv.mark if conv else None

    async def mark_delivered(
        self, cid: ConversationId, upto: int, parts: int | None = None, sending: bool = False
    ) -> None:
        conv = self._get(cid)
        if conv is not None:
            conv.mark = progress(conv.mark, upto, parts, sending, conv.meta.messages_total)

    async def put_file(self, cid: ConversationId, key: str, data: bytes) -> None:
        self._get_or_create(cid).files[check_file_key(key)] = bytes(data)

    async def get_file(self, cid: ConversationId, key: str) -> bytes | None:
        check_file_key(key)
        conv = self._get(cid)
        return conv.files.get(key) if conv else None

    async def forget(
        self,
        cid: ConversationId,
        seqs: Sequence[int],
        facts: Sequence[str] = (),
        summaries: Callable[[str], bool] | None = None,
    ) -> int:
        conv = self._get(cid)
        wanted = set(seqs)
        if conv is None:
            return 0
        logged = [(s.covers_to, s.text) for s in conv.summaries]
        cut = summary_cut(sorted(wanted), facts, logged, conv.summary, summaries)
        found = 0
        for i, message in enumerate(conv.messages):
            if message.seq in wanted:
                for attachment in message.attachments:
                    conv.files.pop(attachment.file or "", None)
                conv.messages[i] = message.tombstone()
                found += 1
        conv.facts = [f for f in conv.facts if f not in facts]
        if cut is not None:
            conv.summaries = [s for s in conv.summaries if s.covers_to < cut]
            last = conv.summaries[-1] if conv.summaries else None
            conv.summary = last.text.strip() if last else ""
            conv.meta.summarized_upto = last.covers_to if last else 0
            conv.meta.summaries_made = len(conv.summaries)
            conv.meta.last_summary_at = last.ts if last else None
            conv.meta.generation = new_generation()
        return found

    async def reset(self, cid: ConversationId) -> None:
        self._data.pop(cid, None)

    async def close(self) -> None:
        return None
