"""A turn's changes to the kept facts, applied with the turn.

`remember` and `forget` run in the middle of a turn, before the model has answered. Written
at once, a fact would stay when the turn then fails (the model errs in its next round), and
the conversation would not be "as it was" after an error. So the tools record their changes
here; later calls of the same turn see them, and the agent applies them right after the turn
is stored. A failed turn discards them.
"""

from __future__ import annotations

from typing import Literal

from membot.ids import ConversationId
from membot.memory.contract.repository import ChatRepository

Op = tuple[Literal["add", "remove"], tuple[str, ...]]


class FactsDraft:
    def __init__(self, repository: ChatRepository, cid: ConversationId, limit: int) -> None:
        self.repository = repository
        self.cid = cid
        self.limit = limit
        self._ops: list[Op] = []
        # Set by commit: the facts the turn removed for good, as the user corrected them.
        self.dropped: list[str] = []

    async def view(self) -> list[str]:
        """The facts as they will be once the turn is stored."""
        facts = await self.repository.get_facts(self.cid)
        for op, items in self._ops:
            if op == "add":
                facts.extend(items)
            else:
                facts = [f for f in facts if f not in items]
        return facts

    async def add(self, fact: str) -> bool | None:
        """As `ChatRepository.add_fact`: False for a duplicate, None when full."""
        facts = await self.view()
        if any(f.casefold() == fact.casefold() for f in facts):
            return False
        if len(facts) >= self.limit:
            return None
        self._ops.append(("add", (fact,)))
        return True

    async def remove(self, facts: list[str]) -> list[str]:
        """As `ChatRepository.remove_facts`: the ones that were kept."""
        removed = [f for f in await self.view() if f in facts]
        if removed:
            self._ops.append(("remove", tuple(removed)))
        return removed

    def _removed_for_good(self) -> list[str]:
        """The facts this turn removed and did not add back: what the user corrected."""
        removed = [f for op, items in self._ops if op == "remove" for f in items]
        added = {f for op, items in self._ops if op == "add" for f in items}
        return [f for f in removed if f not in added]

    def mark(self) -> int:
        """Where the changes stand now, for `undo`."""
        return len(self._ops)

    def undo(self, mark: int) -> None:
        """Drop the changes made since `mark` (tool calls cut short by the user's Stop)."""
        del self._ops[mark:]

    async def commit(self) -> None:
        """Apply the changes, in the order the tools made them."""
        self.dropped = self._removed_for_good()
        for op, items in self._ops:
            if op == "add":
                await self.repository.add_fact(self.cid, items[0], self.limit)
            else:
                await self.repository.remove_facts(self.cid, list(items))
        self._ops.clear()
