"""Images for a vision model: which Telegram photo size to fetch, an image document made
small enough, and the `image_url` content part that carries it.

The part's URL is always a base64 `data:` URL of the bytes membot downloaded itself: a
Telegram file URL carries the bot token, and no URL of ours leaves the process.

Pillow decodes and scales images sent as documents (PNG, WebP, GIF, BMP, TIFF, JPEG of any
size): it is the one library that reads them all and honours a photo's EXIF orientation.
Decoding is CPU-bound: prepare_image runs it in a worker thread."""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from membot.media.errors import TELEGRAM_DOWNLOAD_LIMIT, BrokenFile, FileTooBig, UnsupportedType

log = logging.getLogger(__name__)

#: The most pixels an image sent to the model has: vision models scale larger ones down
#: themselves (to about 1.2-1.6 megapixels), so more only costs bandwidth and tokens.
MAX_IMAGE_PIXELS = 1600 * 1600
#: What vision models accept as they are; anything else is converted to JPEG.
MODEL_MIME_TYPES = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp"}
#: Refuse to decode images larger than this (a "decompression bomb" of a few KB).
_DECODE_PIXELS = 64_000_000
_JPEG_QUALITY = 85


class PhotoSize(NamedTuple):
    """One of the sizes Telegram offers for a photo (`message.photo[i]`)."""

    file_id: str
    width: int
    height: int
    file_size: int | None = None


@dataclass(frozen=True, slots=True)
class PreparedImage:
    """Image bytes a model takes, their MIME type and size in pixels."""

    data: bytes
    mime_type: str
    width: int
    height: int


def choose_photo(sizes: Sequence[PhotoSize], max_pixels: int = MAX_IMAGE_PIXELS) -> PhotoSize:
    """The largest size of at most ``max_pixels`` (and at most Telegram's download limit);
    the smallest size when every one is larger."""
    if not sizes:
        raise ValueError("a photo has at least one size")
    fitting = [
        size
        for size in sizes
        if size.width * size.height <= max_pixels
        and (size.file_size or 0) <= TELEGRAM_DOWNLOAD_LIMIT
    ]
    if fitting:
        return max(fitting, key=lambda s: (s.width * s.height, s.file_size or 0))
    return min(sizes, key=lambda s: (s.width * s.height, s.file_size or 0))


def image_part(image: PreparedImage) -> dict[str, Any]:
    """The Chat Completions content part that shows ``image`` to the model."""
    encoded = base64.b64encode(image.data).decode("ascii")
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{image.mime_type};base64,{encoded}"},
    }


async def prepare_image(
    data: bytes,
    *,
    max_pixels: int = MAX_IMAGE_PIXELS,
    max_bytes: int = TELEGRAM_DOWNLOAD_LIMIT,
) -> PreparedImage:
    """``data`` (a photo or an image document) as an image a model takes: the bytes as they
    are when they already are JPEG/PNG/WebP of at most ``max_pixels``, else scaled down and
    re-encoded. Raises FileTooBig, UnsupportedType (not an image) or BrokenFile."""
    if len(data) > max_bytes:
        raise FileTooBig(len(data), max_bytes)
    started = time.perf_counter()
    image = await asyncio.to_thread(_prepare, data, max_pixels)
    log.info(
        "image prepared: in=%d bytes out=%d bytes %dx%d %s took=%.3fs",
        len(data),
        len(image.data),
        image.width,
        image.height,
        image.mime_type,
        time.perf_counter() - started,
    )
    return image


def _prepare(data: bytes, max_pixels: int) -> PreparedImage:
    # Imported here: Pillow is needed only when an image arrives, not at every start-up.
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as opened:
            fmt = opened.format or ""
            width, height = opened.size
            if width * height > _DECODE_PIXELS:
                raise BrokenFile("image")
            rotated = _exif_rotated(opened)
            opened.load()  # decodes it all: a truncated file fails here, not at the model
            if fmt in MODEL_MIME_TYPES and width * height <= max_pixels and not rotated:
                return PreparedImage(data, MODEL_MIME_TYPES[fmt], width, height)
            image = ImageOps.exif_transpose(opened)
    except UnidentifiedImageError:
        raise UnsupportedType(None) from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        raise BrokenFile("image") from None
    if image.width * image.height > max_pixels:
        scale = (max_pixels / (image.width * image.height)) ** 0.5
        target = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
        image = image.resize(target, Image.Resampling.LANCZOS)
    keep_alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
    out = io.BytesIO()
    if keep_alpha:
        image.save(out, format="PNG", optimize=True)
        mime = "image/png"
    else:
        image.convert("RGB").save(out, format="JPEG", quality=_JPEG_QUALITY)
        mime = "image/jpeg"
    return PreparedImage(out.getvalue(), mime, image.width, image.height)


def _exif_rotated(image: Any) -> bool:
    """Whether the photo's EXIF says to show it turned or mirrored."""
    try:
        return int(image.getexif().get(0x0112, 1)) not in (0, 1)
    except (OSError, ValueError, TypeError):
        return False
