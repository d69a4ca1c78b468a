"""What `membot mcp` offers another agent, for exactly one conversation: the archive search
(`search_history`'s search and budget), the kept facts with an id each, and remember / forget
on them. Transport-free: the MCP server (server.py) and the tests call it alike."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from membot.clock import Clock, utc_now
from membot.core.tools.builtin import MAX_FACT_CHARS, MAX_FACTS
from membot.ids import ConversationId
from membot.llm.tools import ToolError
from membot.memory.contract.repository import ChatRepository
from membot.search.index import HistorySearch
from membot.search.period import BadPeriod, parse_period
from membot.search.present import format_excerpts


@dataclass(frozen=True, slots=True)
class Fact:
    id: str
    text: str


def fact_id(text: str) -> str:
    """A kept fact's id: its text's digest, so it names the same fact however the list moves
    (an id by position would name another fact after a removal)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


class MemoryDesk:
    """One conversation's memory. `cid` is fixed when the server starts: no call can name
    another conversation."""

    def __init__(
        self,
        repository: ChatRepository,
        search: HistorySearch,
        cid: ConversationId,
        *,
        budget_tokens: int,
        clock: Clock = utc_now,
    ) -> None:
        self.repository = repository
        self.search = search
        self.cid = cid
        self.budget_tokens = budget_tokens
        self.clock = clock

    async def search_memory(
        self, query: str, since: str | None = None, until: str | None = None
    ) -> str:
        if not query.strip():
            raise ToolError("the query is empty")
        try:
            first, end = parse_period(since, until)
        except BadPeriod as exc:
            raise ToolError(str(exc)) from None
        if (await self.repository.get_meta(self.cid)).messages_total == 0:
            # HistorySearch drops the index of an empty archive: nothing to search anyway.
            return "No messages are stored in this conversation yet."
        found = await self.search.recall(
            self.cid, query, since=first, until=end, budget_tokens=self.budget_tokens
        )
        return format_excerpts(found, self.clock())

    async def list_facts(self) -> list[Fact]:
        return [Fact(fact_id(text), text) for text in await self.repository.get_facts(self.cid)]

    async def remember(self, fact: str) -> str:
        text = " ".join(fact.split())
        if not text:
            raise ToolError("the fact is empty")
        if len(text) > MAX_FACT_CHARS:
            raise ToolError(f"a fact is at most {MAX_FACT_CHARS} characters")
        added = await self.repository.add_fact(self.cid, text, MAX_FACTS)
        if added is None:
            raise ToolError(f"{MAX_FACTS} facts are already kept; forget some first")
        verb = "Remembered" if added else "Already remembered"
        return f"{verb} (id {fact_id(text)}): {text}"

    async def forget_fact(self, wanted: str) -> str:
        facts = await self.repository.get_facts(self.cid)
        matches = [text for text in facts if fact_id(text) == wanted.strip()]
        if not matches:
            raise ToolError(f"no kept fact has the id {wanted!r}; list_facts gives the ids")
        removed = await self.repository.remove_facts(self.cid, matches)
        if not removed:  # removed by someone else between the two reads
            raise ToolError(f"no kept fact has the id {wanted!r} any more")
        return "Forgot: " + "; ".join(removed)
