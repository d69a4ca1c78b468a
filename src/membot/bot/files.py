"""Files users send, from Telegram: which file a message carries, what can be refused
before it is downloaded, and the download itself (getFile, then the file through the bot's
own session: the URL carries the bot's token, so it never leaves this module).

What can be told from the message is checked first, so a file that cannot be used costs no
download: the declared size against Telegram's 20 MB limit, a voice's duration against
MAX_AUDIO_SECONDS, a document's type. Telegram's own "file is too big" (a size the message
did not declare) is FileTooBig too."""

from __future__ import annotations

import asyncio
import io
import logging
from dataclasses import dataclass
from pathlib import Path

from aiogram import Bot
from aiogram.exceptions import TelegramBadRequest
from aiogram.types import Message

from membot.core.media import Upload, UploadKind
from membot.media.documents import classify, is_image
from membot.media.errors import TELEGRAM_DOWNLOAD_LIMIT, AudioTooLong, FileTooBig
from membot.media.images import PhotoSize, choose_photo

log = logging.getLogger(__name__)

# The longest a download may take (a 20 MB file over a slow link).
DOWNLOAD_TIMEOUT = 120


@dataclass(frozen=True, slots=True)
class SentFile:
    """A file a message carries, not downloaded yet: what Telegram says of it."""

    kind: UploadKind
    file_id: str
    size: int | None
    mime: str | None = None
    name: str | None = None
    seconds: int | None = None  # a voice's, an audio's or a video note's duration
    caption: str = ""


def sent_file(message: Message, caption: str = "") -> SentFile | None:
    """The file of a voice, audio, video note, photo or document message; None otherwise.
    `caption` is the message's caption as the model should read it (without a mention)."""
    if message.voice is not None:
        v = message.voice
        return SentFile("voice", v.file_id, v.file_size, v.mime_type, None, v.duration)
    if message.audio is not None:
        a = message.audio
        return SentFile(
            "audio", a.file_id, a.file_size, a.mime_type, a.file_name, a.duration, caption
        )
    if message.video_note is not None:
        n = message.video_note
        return SentFile("video_note", n.file_id, n.file_size, "video/mp4", None, n.duration)
    if message.photo:
        size = choose_photo(
            [PhotoSize(p.file_id, p.width, p.height, p.file_size) for p in message.photo]
        )
        return SentFile("photo", size.file_id, size.file_size, "image/jpeg", caption=caption)
    if message.document is not None:
        d = message.document
        return SentFile(
            "document", d.file_id, d.file_size, d.mime_type, d.file_name, caption=caption
        )
    return None


def check(sent: SentFile, *, max_audio_seconds: float) -> None:
    """Refuse what can be told before the download: raises a MediaError."""
    if sent.size is not None and sent.size > TELEGRAM_DOWNLOAD_LIMIT:
        raise FileTooBig(sent.size)
    if sent.seconds is not None and sent.seconds > max_audio_seconds:
        raise AudioTooLong(sent.seconds, max_audio_seconds)
    if sent.kind == "document" and not is_image(sent.mime, sent.name):
        classify(sent.mime, sent.name)  # UnsupportedType: nothing the turn could read


async def download(bot: Bot, sent: SentFile) -> Upload:
    """The file's bytes, through getFile and the bot's session."""
    try:
        file = await bot.get_file(sent.file_id)
    except TelegramBadRequest as exc:
        if "too big" in exc.message.lower():
            raise FileTooBig(sent.size or TELEGRAM_DOWNLOAD_LIMIT + 1) from None
        raise
    if file.file_path is None:  # Telegram gives no path only for a file it will not serve
        raise FileTooBig(file.file_size or TELEGRAM_DOWNLOAD_LIMIT + 1)
    buffer = io.BytesIO()
    await bot.download_file(file.file_path, buffer, timeout=DOWNLOAD_TIMEOUT)
    data = buffer.getvalue()
    if len(data) > TELEGRAM_DOWNLOAD_LIMIT:
        raise FileTooBig(len(data))
    log.info("download: kind=%s size=%d", sent.kind, len(data))
    return Upload(kind=sent.kind, data=data, mime=sent.mime, name=sent.name, caption=sent.caption)


async def download_to(bot: Bot, file_id: str, destination: Path) -> int:
    """A file's bytes into `destination` (an export can be larger than is worth holding in
    memory); its size. FileTooBig when Telegram will not serve it (over 20 MB from its cloud
    Bot API; a local Bot API server serves more)."""
    try:
        file = await bot.get_file(file_id)
    except TelegramBadRequest as exc:
        if "too big" in exc.message.lower():
            raise FileTooBig(TELEGRAM_DOWNLOAD_LIMIT + 1) from None
        raise
    if file.file_path is None:
        raise FileTooBig(file.file_size or TELEGRAM_DOWNLOAD_LIMIT + 1)
    await bot.download_file(file.file_path, destination, timeout=DOWNLOAD_TIMEOUT)
    size = (await asyncio.to_thread(destination.stat)).st_size
    log.info("download: kind=export size=%d", size)
    return size
