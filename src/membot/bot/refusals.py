"""What the user is told when a turn is refused before its answer: over a budget or the rate
limit (one line saying which, and when it resets), or a file that cannot be used (one line
saying why, naming the file when it has a name). In the chat's words."""

from __future__ import annotations

import math

from membot.bot import texts
from membot.core.media import ModelSeesNoImages
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
from membot.usage import OverLimit, Quota


def over_limit(words: texts.Texts, refused: OverLimit, quota: Quota | None) -> str:
    now = quota.clock() if quota is not None else refused.resets_at
    seconds = max(1, math.ceil((refused.resets_at - now).total_seconds()))
    if seconds >= 3600:
        wait = words.IN_HOURS.format(hours=seconds // 3600, minutes=seconds % 3600 // 60)
    elif seconds >= 60:
        wait = words.IN_MINUTES.format(minutes=math.ceil(seconds / 60))
    else:
        wait = words.IN_SECONDS.format(seconds=seconds)
    if refused.limit == "daily":
        return words.OVER_DAILY.format(wait=wait)
    if refused.limit == "monthly":
        return words.OVER_MONTHLY.format(date=refused.resets_at.date().isoformat(), wait=wait)
    limit = quota.limits.rate if quota is not None else 0
    return words.OVER_RATE.format(limit=limit, wait=wait)


def unusable_file(words: texts.Texts, exc: MediaError) -> str:
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
