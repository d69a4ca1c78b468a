"""Documents the bot uploads (sendDocument, multipart/form-data as Telegram takes it): kept
with their bytes, refused past the Bot API's 50 MB. A mixin of FakeTelegram."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_request import FileField

from tests.fakes.telegram.protocol import ApiError, chat_id_of, opt_int

MAX_UPLOAD = 50 * 1024 * 1024  # what the Bot API takes from a bot, per file


@dataclass(slots=True)
class SentDocument:
    chat_id: int
    file_name: str
    data: bytes
    caption: str
    thread_id: int | None
    message_id: int
    at: float  # time.monotonic() when the fake accepted it


class Documents:
    def _init_documents(self) -> None:
        self.documents: list[SentDocument] = []
        # hold_uploads(): each sendDocument waits here, as a slow upload, until released.
        self._uploads_open: asyncio.Event | None = None
        self.uploads_waiting = 0
        self.uploads_abandoned = 0  # held uploads whose client hung up: never posted

    def hold_uploads(self) -> None:
        """Keep every sendDocument from here on in flight until `release_uploads`."""
        self._uploads_open = asyncio.Event()

    def release_uploads(self) -> None:
        if self._uploads_open is not None:
            self._uploads_open.set()
        self._uploads_open = None

    async def _held_upload(self, request: web.Request) -> bool:
        """Wait while uploads are held; False when the client hung up meanwhile (the upload
        never completed, so Telegram posts nothing)."""
        gate = self._uploads_open
        if gate is None:
            return True
        self.uploads_waiting += 1
        self._notifier.notify()  # type: ignore[attr-defined]
        try:
            await gate.wait()
        except asyncio.CancelledError:  # the server cancels a handler whose client left
            self.uploads_abandoned += 1
            raise
        finally:
            self.uploads_waiting -= 1
            self._notifier.notify()  # type: ignore[attr-defined]
        if request.transport is None or request.transport.is_closing():
            self.uploads_abandoned += 1
            return False
        return True

    def documents_to(self, chat_id: int) -> list[SentDocument]:
        return [d for d in self.documents if d.chat_id == chat_id]

    async def _send_document(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = chat_id_of(params)
        upload = params.get("document")
        if isinstance(upload, str) and upload.startswith("attach://"):
            upload = params.get(upload.removeprefix("attach://"))  # aiogram's way
        if not isinstance(upload, FileField):
            # A file_id or URL: this fake keeps only what is uploaded.
            raise ApiError(400, "Bad Request: there is no document in the request")
        data = upload.file.read()
        if len(data) > MAX_UPLOAD:
            raise ApiError(413, "Request Entity Too Large")
        if not data:
            raise ApiError(400, "Bad Request: file must be non-empty")
        caption = params.get("caption") or ""
        if len(caption) > 1024:
            raise ApiError(400, "Bad Request: message caption is too long")
        message = self._bot_message(chat_id, "")  # type: ignore[attr-defined]
        del message["text"]
        message["document"] = {
            "file_id": f"fake-document-{message['message_id']}",
            "file_unique_id": f"u-document-{message['message_id']}",
            "file_name": upload.filename,
            "file_size": len(data),
        }
        if caption:
            message["caption"] = caption
        self.documents.append(
            SentDocument(
                chat_id=chat_id,
                file_name=upload.filename,
                data=data,
                caption=caption,
                thread_id=opt_int(params, "message_thread_id"),
                message_id=int(message["message_id"]),
                at=time.monotonic(),
            )
        )
        return message
