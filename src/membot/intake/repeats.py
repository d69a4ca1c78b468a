"""Was this update answered already? Its question's Telegram message id in the chat's archive
says so: the turn stores the question with its answer, before the answer is sent. Asked at
start-up of the journal's crashed-run updates, and by the runner of an update that may be a
repeat (taken over from another worker, or tried again after a failure)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from membot.ids import ConversationId
from membot.intake.albums import Album, album_key
from membot.intake.contract import Entry, has_media
from membot.memory.contract.repository import ChatRepository
from membot.schedule.models import firing_of

log = logging.getLogger(__name__)

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


async def guest_answered(repository: ChatRepository, user_id: int, query: str) -> bool:
    """Whether the guest query `query` (Guest Mode) was answered: its question is in the
    caller's private chat (bot/guest.py), marked with the query's id (`Message.guest`)."""
    stored = await repository.tail(ConversationId.telegram(user_id), DEDUP_WINDOW)
    return any(m.guest == query for m in stored if m.role == "user")


def guest_of(entry: Entry) -> tuple[int, str] | None:
    """(caller's id, guest query id) of a guest message, else None."""
    message = json.loads(entry.data).get("guest_message")
    if not isinstance(message, dict) or not isinstance(message.get("from"), dict):
        return None
    query = message.get("guest_query_id")
    return (int(message["from"]["id"]), str(query)) if query else None


def question_of(entry: Entry) -> tuple[int, int] | None:
    """(chat id, message id) of a message (text, a voice, a photo...): what the archive may
    hold already. Not of an edited message: it keeps the id of the message it changes, whose
    question is in the archive already, and would pass for answered."""
    message = json.loads(entry.data).get("message")
    if not isinstance(message, dict) or not (message.get("text") or has_media(message)):
        return None
    return int(message["chat"]["id"]), int(message["message_id"])


async def unanswered_of(
    records: Sequence[dict[str, Any]],
    repository: ChatRepository,
    *,
    answerable: Callable[[Any], bool],
    readable: Callable[[Mapping[str, Any]], bool] | None,
) -> tuple[list[dict[str, Any]], int]:
    """Of a crashed run's journaled updates not marked done: those to handle again (messages
    whose question never reached the archive; an album when none of its parts did; every due
    task, whose turn checks its task and the archive itself, core/timed.py), and how many
    others are not replayed."""
    replay: list[dict[str, Any]] = []
    answered_albums: set[Album] = set()
    skipped = 0
    for record in records:
        if firing_of(record) is not None:
            replay.append(record)
            continue
        message = record.get("message")
        if not isinstance(message, dict) or not answerable(message):
            skipped += 1
            continue
        if readable is not None and not readable(record):
            log.warning("journal: skipping update %s: it no longer reads", record["update_id"])
            skipped += 1
            continue
        if await answered(repository, int(message["chat"]["id"]), int(message["message_id"])):
            if (album := album_key(message)) is not None:
                answered_albums.add(album)
            continue
        replay.append(record)
    # An album is one question: kept (with its first part's id) when any part was.
    kept = [
        r for r in replay if "message" not in r or album_key(r["message"]) not in answered_albums
    ]
    return kept, skipped
