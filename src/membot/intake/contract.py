"""The intake's contract: how an update gets in, and out to whoever answers it.

    put(batch)   the batch is durable when this returns; only then is Telegram told (the
                 next getUpdates offset, the webhook's 200). Raises IntakeUnavailable.
    take(room)   some of the next updates (at most `room`), each chat's in order; waits a
                 little when there are none.
    fence(e)     inside the chat's turn, before answering: True when `e` was handled already;
                 NotHolder when another process answers its chat now.
    done(e)      inside the chat's turn, once handled: it never comes back.
    control()    the next control updates (Telegram's Stop on a draft), in every process
                 that runs turns: never queued behind a chat's turn, never kept.

Two intakes keep this: the file journal (QUEUE=local, journal.py) and the Redis stream
(QUEUE=redis, redis.py). Sources (polling.py, webhook.py) call `put`; the runner (runner.py)
calls the rest. Nothing here knows aiogram's dispatcher or membot.bot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from membot.errors import Busy, MembotError, Unavailable


class IntakeUnavailable(Unavailable):
    """The update could not be kept now (Redis is down, say): Telegram must send it again."""


class SourceConflict(Busy):
    """Telegram refused a poll: another process polls this bot (409 Conflict)."""


class SourceUnavailable(Unavailable):
    """Telegram could not be reached, or failed (a network error, a 5xx): poll again later."""


class NotHolder(MembotError):
    """From `fence`: the update's shard has another holder now. The update is left pending
    for it, with the chat's later ones. `again`: seen while this process took the shard back
    (the holder is this process once more): the update's turn again, at once."""

    def __init__(self, shard: int, *, again: bool = False) -> None:
        super().__init__(shard)
        self.shard = shard
        self.again = again


@dataclass(frozen=True, slots=True)
class Entry:
    """One update as the runner holds it."""

    shard: int  # the stream's shard (0 in the journal)
    entry_id: str  # the stream's entry id (the update id in the journal)
    update_id: int
    chat: str  # the chat's id as text ("u<id>" by sender, "" for an update without one)
    data: str  # the update's JSON, as Telegram sent it
    redelivered: bool  # it may have been handled already (taken over, tried again)

    @property
    def ref(self) -> tuple[int, str]:
        """Unique among all shards (an entry id is unique only within its stream)."""
        return (self.shard, self.entry_id)


class Intake(Protocol):
    # What the runner does with what it holds when told to stop: True (the stream) leaves
    # what has not started pending for the next process; False (the journal) answers all.
    leaves_pending: bool
    # A failure that passes (transient) is tried again (the stream), or given up (journal).
    retries: bool

    async def start(self) -> None:
        """Ready to put (and to take, in a process that takes)."""
        ...

    async def stop(self) -> None:
        """Take nothing more (the runner stops first; a process that only puts, too)."""
        ...

    async def close(self) -> None:
        """Let go of everything, once the runner is done."""
        ...

    async def put(self, batch: Sequence[Mapping[str, Any]]) -> None: ...

    async def take(self, room: int) -> list[Entry]: ...

    async def fence(self, entry: Entry) -> bool: ...

    async def done(self, entry: Entry) -> None: ...

    async def control(self) -> list[Entry]:
        """The next control updates put (`is_control`), as soon as they are put, whatever
        the chat's turn is doing; [] now and then when there are none. They are not kept:
        what they steer is in progress now or not at all."""
        ...

    def keeps(self, entry: Entry) -> bool:
        """Whether a failed update is still this process's to try again."""
        ...

    def let_go(self, entry: Entry) -> None:
        """The runner holds this update no more (done, left, or never started)."""
        ...

    def rest(self) -> list[Entry]:
        """What was put but not taken yet, when the runner stops (nothing for the stream)."""
        ...

    def outage(self, exc: BaseException) -> None:
        """A failure that passes was seen (by the intake or the runner): warned once."""
        ...

    def up(self) -> None:
        """A call went through again: the end of an outage is said once."""
        ...


def transient(exc: BaseException) -> bool:
    """Failures that pass: the update is tried again, not given up. Redis's errors reach
    here translated (membot/redis/errors.py), as StorageUnavailable."""
    return isinstance(exc, Unavailable)


def chat_of(update: Mapping[str, Any]) -> str:
    """The chat an update belongs to, from Telegram's JSON (without building aiogram's
    model): the key that keeps one chat's updates in one lane (and one shard), in order. A
    guest message (Guest Mode) is its caller's: it is answered in their private chat's
    conversation, whose id is theirs, in turn with that chat's own updates."""
    guest = update.get("guest_message")
    if isinstance(guest, dict):
        sender = guest.get("from")
        return str(sender["id"]) if isinstance(sender, dict) and "id" in sender else ""
    for key, value in update.items():
        if not isinstance(value, dict):
            continue
        chat = value.get("chat")
        if chat is None and isinstance(value.get("message"), dict):  # callback_query
            chat = value["message"].get("chat")
        if isinstance(chat, dict) and isinstance(chat.get("id"), int):
            return str(chat["id"])
        sender = value.get("from")
        if key != "update_id" and isinstance(sender, dict) and isinstance(sender.get("id"), int):
            return f"u{sender['id']}"  # inline queries and the like: by their sender
    return ""


# Updates that steer an answer in progress rather than ask anything: Telegram's Stop on a
# draft. The turn they stop holds its chat's turn and lane, so they cannot wait behind it:
# `put` hands them to `control` at once (intake/runner.py acts on them), and they are never
# kept nor replayed (a stop is for an answer being written now, or for nothing).
CONTROLS = frozenset({"stopped_message_generation"})


def is_control(update: Mapping[str, Any]) -> bool:
    return any(key in CONTROLS for key in update)


def entry_of(update: Mapping[str, Any], data: str) -> Entry:
    """An update outside the stream (the journal's, a control update): shard 0, its id."""
    update_id = int(update["update_id"])
    return Entry(0, str(update_id), update_id, chat_of(update), data, redelivered=False)


# What a person sends that the bot reads besides text: worth keeping and answering again.
MEDIA = ("voice", "audio", "video_note", "photo", "document")


def text_of(update: Mapping[str, Any]) -> str | None:
    """A message update's text, if it has one."""
    message = update.get("message")
    text = message.get("text") if isinstance(message, dict) else None
    return text if isinstance(text, str) else None


def has_media(message: Mapping[str, Any]) -> bool:
    return any(key in message for key in MEDIA)
