"""A task, as every backend stores it, and its firing: the update a due task becomes.

A task belongs to one Telegram chat. `due` is its next time (UTC); a repeating one has an
iCalendar RRULE (`repeat`) read from `anchor`, the local date-time it was first set for, in
`zone`, the chat's time zone when it was set: "every day at 9" stays at 9 in that zone across
daylight-saving changes.

When a task is due it enters the chat's intake as an update of its own (`Firing.update`),
shaped like Telegram's so the intake orders it by its chat: `{"update_id": <negative id>,
"membot_task": {"chat": {"id": ...}, "task": ..., "due": ...}}`. The id is derived from
(chat, task, due): the same firing put twice is the same update, and it is negative, so it
never meets one of Telegram's (which are positive)."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from membot.clock import iso, parse_iso, utc_now
from membot.errors import MembotError

# The key of a firing in an update (Telegram's updates never have it).
TASK_UPDATE = "membot_task"

_ID = re.compile(r"[a-z0-9]{8}")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
# A task's text, in characters: what the user asked, in their words.
MAX_TEXT = 2000


class InvalidTaskId(MembotError, ValueError):
    """Not a task id (ids reach keys and file names: only ours are accepted)."""


def new_task_id() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(8))


def check_task_id(value: str) -> str:
    """`value` if it is a task id (as the model or a button may send one back), else raise."""
    if not isinstance(value, str) or not _ID.fullmatch(value.strip().lower()):
        raise InvalidTaskId("not a task id")
    return value.strip().lower()


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    chat: int  # the Telegram chat it belongs to
    text: str  # what to do at its time, in the user's words
    due: datetime  # its next time, UTC
    zone: str  # the IANA zone its times are read and said in
    created: datetime = field(default_factory=utc_now)
    author: int | None = None  # the user who set it: charged for its turns
    name: str | None = None  # the author's name, for groups
    repeat: str | None = None  # an RRULE ("FREQ=DAILY"); None: once
    anchor: str | None = None  # the local date-time the rule starts from (ISO, no zone)
    thread: int | None = None  # the forum topic it was set in

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "chat": self.chat,
            "text": self.text,
            "due": iso(self.due),
            "zone": self.zone,
            "created": iso(self.created),
        }
        for key in ("author", "name", "repeat", "anchor", "thread"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        """Raises ValueError (KeyError, TypeError) for a record that does not read."""

        def opt_int(key: str) -> int | None:
            value = data.get(key)
            return None if value is None else int(value)

        def opt_str(key: str) -> str | None:
            value = data.get(key)
            return None if value is None else str(value)

        return cls(
            id=check_task_id(str(data["id"])),
            chat=int(data["chat"]),
            text=str(data["text"]),
            due=parse_iso(str(data["due"])),
            zone=str(data["zone"]),
            created=parse_iso(str(data["created"])),
            author=opt_int("author"),
            name=opt_str("name"),
            repeat=opt_str("repeat"),
            anchor=opt_str("anchor"),
            thread=opt_int("thread"),
        )

    def moved(self, due: datetime) -> Task:
        return replace(self, due=due)

    @property
    def firing(self) -> Firing:
        return Firing(self.chat, self.id, self.due)


@dataclass(frozen=True, slots=True)
class Firing:
    """One time of one task: what enters the intake when it is due."""

    chat: int
    task: str
    due: datetime

    @property
    def key(self) -> str:
        """Names this firing in the archive: the turn it started is marked with it."""
        return f"{self.task}@{iso(self.due)}"

    @property
    def update_id(self) -> int:
        digest = hashlib.blake2b(f"{self.chat}:{self.key}".encode(), digest_size=8).digest()
        return -(int.from_bytes(digest, "big") >> 2) - 1  # negative, within 63 bits

    def update(self) -> dict[str, Any]:
        return {
            "update_id": self.update_id,
            TASK_UPDATE: {"chat": {"id": self.chat}, "task": self.task, "due": iso(self.due)},
        }


def firing_of(update: Any) -> Firing | None:
    """The firing an update carries, None for any other update (or one that does not read)."""
    if not isinstance(update, dict):
        return None
    body = update.get(TASK_UPDATE)
    if not isinstance(body, dict):
        return None
    try:
        return Firing(
            int(body["chat"]["id"]), check_task_id(str(body["task"])), parse_iso(str(body["due"]))
        )
    except (KeyError, TypeError, ValueError):
        return None
