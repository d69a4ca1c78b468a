"""A turn that brings files (voice, audio, video notes, photos, albums, documents): the
routers of voice.py, photos.py and documents.py all end here.

The order is the promise of issue #18: the allowlist (AccessMiddleware) and the budgets
and rate limit (`service.admit`, in run_turn) before anything is downloaded; then what the
message itself says is refused without a download (bot/files.py `check`); then the
download and the turn. A file that cannot be used is one short line in the chat's
language, and nothing of the turn is stored (the turn stores only once it has its answer)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from aiogram import Bot
from aiogram.types import Message

from membot.bot import texts
from membot.bot.files import SentFile, check, download, sent_file
from membot.bot.filters import strip_mention
from membot.bot.handlers.chat import TelegramSink, run_turn, texts_for, to_incoming
from membot.config.groups import MediaSettings
from membot.core.media import ModelSeesNoImages
from membot.core.service import ConversationService
from membot.core.turn import TurnResult
from membot.media.errors import (
    AudioTooLong,
    BrokenFile,
    FileTooBig,
    ImageTooLarge,
    MediaError,
    NoAudio,
    NoTextLayer,
    NotThatKind,
    TooComplex,
)

log = logging.getLogger(__name__)


async def answer_files(
    message: Message,
    bot: Bot,
    service: ConversationService,
    media: MediaSettings,
    album: Sequence[Message] = (),
    *,
    streaming: bool = False,
) -> None:
    """One turn for `message`'s file, or an album's (`album`: every part's message, in
    order, the first being `message`). `streaming` as for text (run_turn): in a private chat
    the answer grows in a draft, headed by the transcript once a voice is heard."""
    parts = list(album) or [message]
    username = (await bot.me()).username if message.chat.type != "private" else None
    sent = [
        s
        for m in parts
        if (s := sent_file(m, strip_mention(m.caption or "", username))) is not None
    ]
    incoming = await to_incoming(message, bot, text="")

    async def turn(sink: TelegramSink) -> TurnResult:
        for position, file in enumerate(sent, 1):
            with _about(position, file):
                check(file, max_audio_seconds=media.max_audio_seconds)
        uploads = []
        for position, file in enumerate(sent, 1):
            with _about(position, file):
                uploads.append(await download(bot, file))
        return await service.say(replace(incoming, uploads=tuple(uploads)), sink)

    try:
        await run_turn(message, bot, service, incoming, turn, streaming=streaming)
    except MediaError as refused:
        log.info("chat %s: %s not used: %s", message.chat.id, _kinds(sent), type(refused).__name__)
        which = sent[refused.position - 1] if refused.position else None
        if isinstance(refused, NotThatKind) and which is not None and which.kind == "photo":
            # Telegram makes every photo a JPEG: one that is no image was damaged on the way.
            refused = BrokenFile("image").about(refused.position, refused.file_name)
        await message.answer(refusal(await texts_for(service, message), refused))


def refusal(words: texts.Texts, exc: MediaError) -> str:
    """What the user is told of a file that cannot be used, naming the file when it has
    a name (in an album, which of them)."""
    reply = _reason(words, exc)
    return words.FILE_NAMED.format(name=exc.file_name, reply=reply) if exc.file_name else reply


def _reason(words: texts.Texts, exc: MediaError) -> str:
    if isinstance(exc, ModelSeesNoImages):
        if exc.vision_models:
            return words.NO_IMAGES.format(model=exc.model, models=", ".join(exc.vision_models))
        return words.NO_IMAGES_AT_ALL.format(model=exc.model)
    if isinstance(exc, FileTooBig):
        return words.FILE_TOO_BIG.format(limit_mb=exc.limit // (1024 * 1024))
    if isinstance(exc, ImageTooLarge):
        limit_mp = f"{exc.limit / 1_000_000:g}"
        return words.IMAGE_TOO_LARGE.format(limit_mp=limit_mp)
    if isinstance(exc, AudioTooLong):
        return words.AUDIO_TOO_LONG.format(minutes=max(1, round(exc.limit / 60)))
    if isinstance(exc, NoTextLayer):
        return words.PDF_NO_TEXT
    if isinstance(exc, NoAudio):
        return words.NO_SOUND
    if isinstance(exc, NotThatKind):
        return {"image": words.NOT_IMAGE, "audio": words.NOT_AUDIO}.get(exc.kind, words.NOT_TEXT)
    if isinstance(exc, TooComplex):
        return words.PDF_TOO_COMPLEX
    if isinstance(exc, BrokenFile):
        return words.FILE_BROKEN
    return words.FILE_UNSUPPORTED


@contextmanager
def _about(position: int, file: SentFile) -> Iterator[None]:
    """A MediaError raised inside says which of the message's files it is about."""
    try:
        yield
    except MediaError as exc:
        exc.about(position, file.name)
        raise


def _kinds(sent: Sequence[SentFile]) -> str:
    return ",".join(file.kind for file in sent) or "nothing"
