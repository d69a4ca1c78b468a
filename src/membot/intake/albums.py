"""Albums: photos or documents sent together arrive as one update each, sharing Telegram's
`media_group_id`. The runner answers them in one turn (runner.py); the journal keeps and
replays them as one question (journal.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from membot.intake.contract import Entry

Album = tuple[Any, str]  # (chat id, media_group_id)

# Albums remembered so their later parts are kept with the first (a few in flight at most).
MAX_ALBUMS = 256


def album_of(entry: Entry) -> str | None:
    """The album an update's message is a part of, or None."""
    if '"media_group_id"' not in entry.data:  # no need to read the JSON of every update
        return None
    for value in json.loads(entry.data).values():
        if isinstance(value, dict) and isinstance(value.get("media_group_id"), str):
            return str(value["media_group_id"])
    return None


def album_key(message: Mapping[str, Any]) -> Album | None:
    """The album of a message (Telegram's JSON) in its chat, or None."""
    group = message.get("media_group_id")
    chat = message.get("chat")
    if not isinstance(group, str) or not isinstance(chat, dict):
        return None
    return chat.get("id"), group


class RecentAlbums:
    """The albums whose first part was kept lately: the later parts carry no caption (a
    group's mention of the bot), and go with the first."""

    def __init__(self) -> None:
        self._albums: dict[Album, None] = {}  # oldest first

    def __contains__(self, album: Album) -> bool:
        return album in self._albums

    def add(self, album: Album) -> None:
        self._albums[album] = None
        if len(self._albums) > MAX_ALBUMS:
            del self._albums[next(iter(self._albums))]
