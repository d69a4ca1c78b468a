"""Background work done once per conversation across processes: what the summarizer asks.

Inside one process `TaskSupervisor` runs at most one summary per conversation. With several
processes on one Redis, each would make its own, so the summarizer first takes a lease
without waiting, and skips the summary when another process holds it:
`membot.redis.lease.RedisSummaryLease` (STORAGE=redis), built by membot.wiring.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from membot.ids import ConversationId


class SummaryLease(Protocol):
    def hold(self, cid: ConversationId) -> contextlib.AbstractAsyncContextManager[bool]:
        """Hold the conversation's summary lease for the block: True if this process holds
        it, False if another one does (or it cannot be taken now). Never waits."""
        ...
