"""Was this update answered already? Its question's Telegram message id in the chat's archive
says so: the turn stores the question with its answer, before the answer is sent. Asked at
start-up of the journal's crashed-run updates, and by the runner of an update that may be a
repeat (taken over from another worker, or tried again after a failure)."""

from __future__ import annotations

import json

from membot.ids import ConversationId
from membot.intake.contract import Entry, has_media
from membot.memory.contract.repository import ChatRepository

# How far back a chat's archive is read at first to find a question whose done mark was lost.
DEDUP_WINDOW = 100


async def answered(repository: ChatRepository, chat_id: int, message_id: int) -> bool:
    """Whether the question with this Telegram message id is in its chat's archive. Message ids
    grow within a chat, so the look-back widens until it reaches an older question (a turn
    with tool steps is many lines) or the start of the archive."""
    limit = DEDUP_WINDOW
    while True:
        stored = await repository.tail(ConversationId.telegram(chat_id), limit)
        ids = [m.tg_message_id for m in stored if m.role == "user" and m.tg_message_id]
        if message_id in ids:
            return True
        if len(stored) < limit or (ids and min(ids) < message_id):
            return False
        limit *= 4


def question_of(entry: Entry) -> tuple[int, int] | None:
    """(chat id, message id) of a message (text, a voice, a photo...): what the archive may
    hold already. Not of an edited message: it keeps the id of the message it changes, whose
    question is in the archive already, and would pass for answered."""
    message = json.loads(entry.data).get("message")
    if not isinstance(message, dict) or not (message.get("text") or has_media(message)):
        return None
    return int(message["chat"]["id"]), int(message["message_id"])
