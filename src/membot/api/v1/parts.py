"""The content parts of the last user message, as the turn's text and files: `text`, and
`image_url`, `input_audio` and `file` with their bytes in the request (base64), each an
upload of the turn as /api/chat's attachments are (core/media.py understands them: an image
shown to the model, audio transcribed, a document read and kept)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from membot.api.base64s import decode, decoded_size
from membot.api.models import MAX_ATTACHMENTS
from membot.api.v1.errors import from_media_error, invalid
from membot.core.media import Upload, UploadKind
from membot.media.errors import TELEGRAM_DOWNLOAD_LIMIT, FileTooBig

_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg", "m4a": "audio/mp4"}
_TOKEN = re.compile(r"[a-z0-9.+-]{1,20}")
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?((?:;[^;,]*)*?);base64,(.*)", re.DOTALL)


class Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ImageUrl(Lenient):
    url: str = Field(description="A data: URL (base64); membot fetches no address.")


class InputAudio(Lenient):
    data: str = Field(description="The clip's bytes, base64.")
    format: str = Field(max_length=20, description="wav, mp3 (or another: ogg, m4a, ...).")


class InputFile(Lenient):
    file_data: str | None = Field(
        default=None, description="The file's bytes: a data: URL or plain base64."
    )
    filename: str | None = Field(default=None, max_length=255)
    file_id: str | None = Field(default=None, description="Refused: membot keeps no files.")


class ContentPart(Lenient):
    type: str = Field(description="text, image_url, input_audio or file; others are refused.")
    text: str | None = None
    image_url: ImageUrl | None = None
    input_audio: InputAudio | None = None
    file: InputFile | None = None


async def content_of(
    content: str | list[ContentPart] | None, where: str, max_bytes: int = TELEGRAM_DOWNLOAD_LIMIT
) -> tuple[str, tuple[Upload, ...], tuple[str, ...]]:
    """The last message's text, its files as the turn's uploads (as /api/chat's
    attachments), and where each file's part is. A file over `max_bytes` (the media
    limit) is refused by its base64's length, before it is decoded, as the media layer
    would refuse its bytes (413 payload_too_large, naming the part)."""
    if not isinstance(content, list):
        return content or "", (), ()
    texts: list[str] = []
    uploads: list[Upload] = []
    places: list[str] = []
    for i, part in enumerate(content):
        place = f"{where}.{i}"
        if part.type == "text":
            texts.append(part.text or "")
            continue
        if part.type == "image_url" and part.image_url is not None:
            file = _image(part.image_url.url, place)
        elif part.type == "input_audio" and part.input_audio is not None:
            file = _audio(part.input_audio, place)
        elif part.type == "file" and part.file is not None:
            file = _file(part.file, place)
        else:
            raise invalid(
                f"A content part of type {part.type[:40]!r} is not taken: text, image_url, "
                "input_audio and file (their bytes in the request) are.",
                place,
                "unsupported_content",
            )
        places.append(place)
        size = decoded_size(file.data)
        if size > max_bytes:
            too_big = FileTooBig(size, max_bytes)
            too_big.about(len(places), file.name)
            raise from_media_error(too_big, tuple(places))
        raw = await _decoded(file.data, place, file.what)
        uploads.append(Upload(file.kind, raw, mime=file.mime, name=file.name))
    if len(uploads) > MAX_ATTACHMENTS:
        sentence = f"At most {MAX_ATTACHMENTS} files (images, audio, documents) are taken."
        raise invalid(sentence, where, "too_many_images")
    return "\n".join(texts), tuple(uploads), tuple(places)


@dataclass(frozen=True, slots=True)
class _Encoded:
    """A file part before its base64 is decoded."""

    kind: UploadKind
    data: str
    what: str  # for the sentence when the base64 is bad
    mime: str | None = None
    name: str | None = None


def _image(url: str, where: str) -> _Encoded:
    """An image_url part as the turn's upload, as /api/chat's image attachments are."""
    match = _DATA_URL.fullmatch(url.strip())
    if match is None:
        raise invalid(
            "An image must be a data: URL (data:image/...;base64,...); membot fetches no address.",
            where,
            "invalid_image_url",
        )
    return _Encoded("photo", match.group(3), "An image", mime=match.group(1))


def _audio(part: InputAudio, where: str) -> _Encoded:
    """An input_audio part: transcribed, as /api/chat's audio attachments are."""
    form = part.format.strip().lower()
    mime = _AUDIO_TYPES.get(form, f"audio/{form}" if _TOKEN.fullmatch(form) else None)
    return _Encoded("audio", part.data, "An audio clip", mime=mime)


def _file(part: InputFile, where: str) -> _Encoded:
    """A file part: a document (or an image) sent with its bytes, as /api/chat's document
    attachments are; a file_id names a file uploaded to OpenAI, which membot never has."""
    if part.file_data is None:
        raise invalid(
            "A file must come with its bytes (file_data); membot has no file storage to "
            "name one from (file_id).",
            where,
            "unsupported_content",
        )
    data = part.file_data.strip()
    match = _DATA_URL.fullmatch(data)
    mime = match.group(1) if match is not None else None
    encoded = match.group(3) if match is not None else data
    return _Encoded("document", encoded, "A file", mime=mime, name=part.filename)


async def _decoded(data: str, where: str, what: str) -> bytes:
    try:
        raw = await decode(data)
    except ValueError:  # binascii.Error too
        raw = b""
    if not raw:
        code = "invalid_image" if what == "An image" else "invalid_file"
        raise invalid(f"{what}'s data is not valid base64, or is empty.", where, code)
    return raw
