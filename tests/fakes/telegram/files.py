"""Files of the fake Bot API: bytes a test registers, served as Telegram serves them.

`getFile` answers a File object with a `file_path`; the bytes are then downloaded from
`/file/bot<token>/<file_path>`. Like Telegram's cloud Bot API, a file over 20 MB is
refused by getFile ("Bad Request: file is too big") and an unknown id is "invalid file_id".
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

#: Telegram's limit on what a bot may download, in bytes.
DOWNLOAD_LIMIT = 20 * 1024 * 1024

_EXTENSIONS = {
    "voice": ".oga",
    "video_note": ".mp4",
    "photo": ".jpg",
    "audio": ".mp3",
    "video": ".mp4",
}
_FOLDERS = {"voice": "voice", "video_note": "video_notes", "photo": "photos", "audio": "music"}


class FileError(Exception):
    """What getFile answers instead of a file: (status, description) as Telegram words it."""

    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.description = description


@dataclass(frozen=True, slots=True)
class StoredFile:
    file_id: str
    file_unique_id: str
    file_path: str
    data: bytes


class FileStore:
    """Registered files by id and by path; every download served is recorded in order."""

    def __init__(self) -> None:
        self._by_id: dict[str, StoredFile] = {}
        self._by_path: dict[str, StoredFile] = {}
        self._numbers = itertools.count(1)
        self.downloads: list[str] = []  # file_id of every download served

    def add(self, data: bytes, kind: str = "document", file_name: str = "") -> dict[str, Any]:
        """Register ``data``; the fields a message's file object carries (file_size too)."""
        n = next(self._numbers)
        extension = _EXTENSIONS.get(kind, "")
        if not extension and "." in file_name:
            extension = "." + file_name.rsplit(".", 1)[1]
        stored = StoredFile(
            file_id=f"fake-{kind}-file-{n}",
            file_unique_id=f"u-{kind}-file-{n}",
            file_path=f"{_FOLDERS.get(kind, kind + 's')}/file_{n}{extension}",
            data=data,
        )
        self._by_id[stored.file_id] = stored
        self._by_path[stored.file_path] = stored
        return {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_size": len(data),
        }

    def get_file(self, file_id: Any) -> dict[str, Any]:
        """getFile's result for ``file_id``. Raises FileError as Telegram refuses."""
        if not isinstance(file_id, str) or not file_id:
            raise FileError(400, "Bad Request: file_id is empty")
        stored = self._by_id.get(file_id)
        if stored is None:
            raise FileError(400, "Bad Request: invalid file_id")
        if len(stored.data) > DOWNLOAD_LIMIT:
            raise FileError(400, "Bad Request: file is too big")
        return {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_size": len(stored.data),
            "file_path": stored.file_path,
        }

    def download(self, file_path: str) -> bytes | None:
        """The bytes at ``file_path`` (None: Telegram's 404), for files getFile gives out."""
        stored = self._by_path.get(file_path)
        if stored is None or len(stored.data) > DOWNLOAD_LIMIT:
            return None
        self.downloads.append(stored.file_id)
        return stored.data
