"""A conversation's turn across processes: what the conversation service asks of it.

Inside one process `ConversationService` already orders a conversation's turns with an
asyncio lock (first come, first served). With several processes on one Redis that is not
enough, so, once a process holds its local lock, it also holds the conversation's turn
lock: `membot.redis.turnlock.RedisTurnLocks` (STORAGE=redis), built by membot.wiring.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from membot.ids import ConversationId


class TurnLocks(Protocol):
    def hold(
        self, cid: ConversationId, *, wait: bool = True
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold the conversation's turn; ConversationBusy (membot.errors) at once if `wait`
        is False and it is held."""
        ...
