"""The updates with something besides text: photos, voice, audio, video notes, documents,
stickers, pinned messages. A mixin of FakeTelegram.
"""

from __future__ import annotations

from typing import Any, Unpack

from tests.fakes.telegram.records import (
    MessageOptions,
)


class MediaUpdates:
    def push_sticker(
        self, chat_id: int, *, emoji: str = "👍", **options: Unpack[MessageOptions]
    ) -> int:
        message = self._incoming(chat_id, options)
        message["sticker"] = {
            **self._file("sticker"),
            "type": "regular",
            "width": 512,
            "height": 512,
            "is_animated": False,
            "is_video": False,
            "emoji": emoji,
        }
        return self.push_update({"message": message})

    def push_pinned(
        self, chat_id: int, pinned_message_id: int, **options: Unpack[MessageOptions]
    ) -> int:
        """A service message: the user pinned ``pinned_message_id`` (one of the bot's, say)."""
        message = self._incoming(chat_id, options)
        pinned = self._messages.get(chat_id, {}).get(pinned_message_id)
        if pinned is None:
            raise ValueError(f"chat {chat_id} has no message {pinned_message_id} to pin")
        message["pinned_message"] = {k: v for k, v in pinned.items() if k != "reply_to_message"}
        return self.push_update({"message": message})

    def push_photo(
        self,
        chat_id: int,
        *,
        caption: str | None = None,
        data: bytes | None = None,
        width: int = 1280,
        height: int = 1280,
        media_group_id: str | None = None,
        caption_entities: list[dict[str, Any]] | None = None,
        **options: Unpack[MessageOptions],
    ) -> int:
        """A photo in two sizes; with ``data``, its larger size is those bytes (getFile).
        ``media_group_id``: a part of an album (Telegram sends one update per part)."""
        message = self._incoming(chat_id, options)
        large = self.files.add(data, "photo") if data is not None else self._file("photo")
        message["photo"] = [
            {**self._file("photo"), "width": 90, "height": 90, "file_size": 1_200},
            {"file_size": 98_000, **large, "width": width, "height": height},
        ]
        if caption is not None:
            message["caption"] = caption
        if caption_entities:
            message["caption_entities"] = caption_entities
        if media_group_id is not None:
            message["media_group_id"] = media_group_id
        return self.push_update({"message": message})

    def push_audio(
        self,
        chat_id: int,
        data: bytes,
        *,
        duration: int = 3,
        file_name: str = "song.ogg",
        mime_type: str = "audio/ogg",
        caption: str | None = None,
        **options: Unpack[MessageOptions],
    ) -> int:
        """An audio file (music, a recording sent as a file)."""
        message = self._incoming(chat_id, options)
        file = self.files.add(data, "audio")
        message["audio"] = {
            **file,
            "duration": duration,
            "file_name": file_name,
            "mime_type": mime_type,
        }
        if caption is not None:
            message["caption"] = caption
        return self.push_update({"message": message})

    def push_voice(
        self,
        chat_id: int,
        *,
        duration: int = 3,
        data: bytes | None = None,
        **options: Unpack[MessageOptions],
    ) -> int:
        """A voice message; with ``data``, those bytes can be downloaded (getFile)."""
        message = self._incoming(chat_id, options)
        file = self.files.add(data, "voice") if data is not None else self._file("voice")
        message["voice"] = {
            "file_size": 6_000 * duration,
            **file,
            "duration": duration,
            "mime_type": "audio/ogg",
        }
        return self.push_update({"message": message})

    def push_video_note(
        self,
        chat_id: int,
        data: bytes,
        *,
        duration: int = 3,
        length: int = 240,
        **options: Unpack[MessageOptions],
    ) -> int:
        """A round video note of ``data`` (an MP4)."""
        message = self._incoming(chat_id, options)
        file = self.files.add(data, "video_note")
        message["video_note"] = {**file, "duration": duration, "length": length}
        return self.push_update({"message": message})

    def push_document(
        self,
        chat_id: int,
        data: bytes,
        *,
        file_name: str,
        mime_type: str | None = None,
        caption: str | None = None,
        declare_size: bool = True,
        media_group_id: str | None = None,
        **options: Unpack[MessageOptions],
    ) -> int:
        """A file sent as a document (a PDF, a text file, an image sent uncompressed).
        Without ``declare_size`` the message says nothing of its size (getFile still does)."""
        message = self._incoming(chat_id, options)
        document: dict[str, Any] = {**self.files.add(data, "document", file_name)}
        if not declare_size:
            del document["file_size"]
        if media_group_id is not None:
            message["media_group_id"] = media_group_id
        document["file_name"] = file_name
        if mime_type is not None:
            document["mime_type"] = mime_type
        message["document"] = document
        if caption is not None:
            message["caption"] = caption
        return self.push_update({"message": message})
