"""/import sent alone: the export awaited as the same user's next document, until a deadline
kept in the chat's state (so a restart keeps waiting). A filter, so it reads the state
itself: filters run before the middleware that gives handlers their chat."""

from __future__ import annotations

from datetime import datetime

from aiogram.filters import Filter
from aiogram.types import Message

from membot.clock import Clock, parse_iso
from membot.core.service import ConversationService
from membot.ids import ConversationId
from membot.memory.contract.state import ConversationState


def awaited(state: ConversationState, user_id: int | None, now: datetime) -> bool:
    """Whether this user's document, now, is the export /import waits for."""
    return (
        user_id is not None
        and state.import_by == user_id
        and state.import_until is not None
        and now < parse_iso(state.import_until)
    )


class AwaitedExport(Filter):
    """A document from the user who sent /import alone, while it is awaited."""

    async def __call__(self, message: Message, service: ConversationService, clock: Clock) -> bool:
        if message.from_user is None:
            return False
        state = await service.state(ConversationId.telegram(message.chat.id))
        return awaited(state, message.from_user.id, clock())
