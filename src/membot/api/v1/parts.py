"""The content parts of the last user message, as the turn's text and files: `text`, and
`image_url`, `input_audio` and `file` with their bytes in the request (base64), each an
upload of the turn as /api/chat's attachments are (core/media.py understands them: an image
shown to the model, audio transcribed, a document read and kept)."""

from __future__ import annotations

import base64
import binascii
import re

from pydantic import BaseModel, ConfigDict, Field

from membot.api.models import MAX_ATTACHMENTS
from membot.api.v1.errors import invalid
from membot.core.media import Upload

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


def content_of(
    content: str | list[ContentPart] | None, where: str
) -> tuple[str, tuple[Upload, ...], tuple[str, ...]]:
    """The last message's text, its files as the turn's uploads (as /api/chat's
    attachments), and where each file's part is."""
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
            upload = _image(part.image_url.url, place)
        elif part.type == "input_audio" and part.input_audio is not None:
            upload = _audio(part.input_audio, place)
        elif part.type == "file" and part.file is not None:
            upload = _file(part.file, place)
        else:
            raise invalid(
                f"A content part of type {part.type[:40]!r} is not taken: text, image_url, "
                "input_audio and file (their bytes in the request) are.",
                place,
                "unsupported_content",
            )
        uploads.append(upload)
        places.append(place)
    if len(uploads) > MAX_ATTACHMENTS:
        sentence = f"At most {MAX_ATTACHMENTS} files (images, audio, documents) are taken."
        raise invalid(sentence, where, "too_many_images")
    return "\n".join(texts), tuple(uploads), tuple(places)


def _image(url: str, where: str) -> Upload:
    """An image_url part as the turn's upload, as /api/chat's image attachments are."""
    match = _DATA_URL.fullmatch(url.strip())
    if match is None:
        raise invalid(
            "An image must be a data: URL (data:image/...;base64,...); membot fetches no address.",
            where,
            "invalid_image_url",
        )
    return Upload("photo", _decoded(match.group(3), where, "An image"), mime=match.group(1))


def _audio(part: InputAudio, where: str) -> Upload:
    """An input_audio part: transcribed, as /api/chat's audio attachments are."""
    form = part.format.strip().lower()
    mime = _AUDIO_TYPES.get(form, f"audio/{form}" if _TOKEN.fullmatch(form) else None)
    return Upload("audio", _decoded(part.data, where, "An audio clip"), mime=mime)


def _file(part: InputFile, where: str) -> Upload:
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
    raw = _decoded(match.group(3) if match is not None else data, where, "A file")
    return Upload("document", raw, mime=mime, name=part.filename)


def _decoded(data: str, where: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not raw:
        code = "invalid_image" if what == "An image" else "invalid_file"
        raise invalid(f"{what}'s data is not valid base64, or is empty.", where, code)
    return raw
