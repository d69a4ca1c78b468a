"""Images for a vision model: which Telegram photo size to fetch, an image document made
small enough, and the `image_url` content part that carries it.

The part's URL is always a base64 `data:` URL of the bytes membot downloaded itself: a
Telegram file URL carries the bot token, and no URL of ours leaves the process.

Pillow decodes and scales images sent as documents (PNG, WebP, GIF, BMP, TIFF, JPEG of any
size): it is the one library that reads them all and honours a photo's EXIF orientation.
A few hundred kilobytes of PNG can hold 60 million pixels (a quarter of a gigabyte once
decoded), so ImageDecoder reads the size from the header before decoding, decodes a JPEG at
a reduced scale when it is larger than needed, refuses what would still be over
MEDIA_MAX_PIXELS, and runs at most MEDIA_IMAGE_DECODES decodes at once, each in a worker
thread (decoding is CPU-bound)."""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from membot.media.errors import (
    TELEGRAM_DOWNLOAD_LIMIT,
    BrokenFile,
    FileTooBig,
    ImageTooLarge,
    NotThatKind,
)

log = logging.getLogger(__name__)

#: The most pixels an image sent to the model has: vision models scale larger ones down
#: themselves (to about 1.2-1.6 megapixels), so more only costs bandwidth and tokens.
MAX_IMAGE_PIXELS = 1600 * 1600
#: What vision models accept as they are; anything else is converted to JPEG.
MODEL_MIME_TYPES = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp"}
#: The most pixels decoded whole by default (MEDIA_MAX_PIXELS): at 4 bytes a pixel, 100 MB.
DECODE_PIXELS = 25_000_000
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


class ImageDecoder:
    """Decodes images for the model (see ``prepare``), bounded in memory: an image's size is
    read from its header first, a JPEG (or JPEG 2000) larger than needed is decoded at a
    reduced scale, and an image of more than ``max_pixels`` after that is refused
    (ImageTooLarge) before any pixel is decoded. At most ``decodes`` run at once, each in a
    worker thread; more wait for a slot (a cancelled caller's decode holds its slot until its
    thread ends).

    A decoded pixel takes at most 4 bytes in Pillow (RGB is stored as RGBX), so one decode
    holds at most ``4 * max_pixels`` bytes for the image itself, and the decoder at most
    ``decodes`` times that."""

    def __init__(
        self,
        *,
        max_pixels: int = DECODE_PIXELS,
        decodes: int = 2,
        target_pixels: int = MAX_IMAGE_PIXELS,
    ) -> None:
        self.max_pixels = max_pixels
        self.target_pixels = target_pixels
        self.decodes = decodes
        self._slots = asyncio.Semaphore(decodes)

    async def prepare(
        self, data: bytes, *, max_bytes: int = TELEGRAM_DOWNLOAD_LIMIT
    ) -> PreparedImage:
        """``data`` (a photo or an image document) as an image a model takes: the bytes as
        they are when they already are JPEG/PNG/WebP of at most the target size, else scaled
        down and re-encoded. Raises FileTooBig, ImageTooLarge, NotThatKind (not an image)
        or BrokenFile."""
        if len(data) > max_bytes:
            raise FileTooBig(len(data), max_bytes)
        async with self._slots:
            started = time.perf_counter()
            work = asyncio.ensure_future(
                asyncio.to_thread(_prepare, data, self.target_pixels, self.max_pixels)
            )
            try:
                image = await asyncio.shield(work)
            except asyncio.CancelledError:
                # The thread cannot be stopped (an API client hung up): its slot is held
                # until it ends, or cancelled requests would stack decodes past the bound.
                await asyncio.wait({work})
                if not work.cancelled():
                    work.exception()  # nobody wants its image or its error now
                raise
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


async def prepare_image(
    data: bytes,
    *,
    max_pixels: int = MAX_IMAGE_PIXELS,
    max_bytes: int = TELEGRAM_DOWNLOAD_LIMIT,
) -> PreparedImage:
    """``data`` prepared by a decoder of its own with the default bounds (one decode)."""
    return await ImageDecoder(decodes=1, target_pixels=max_pixels).prepare(
        data, max_bytes=max_bytes
    )


def _prepare(data: bytes, target: int, limit: int) -> PreparedImage:
    # Imported here: Pillow is needed only when an image arrives, not at every start-up.
    from PIL import Image, ImageOps, UnidentifiedImageError

    width = height = 0
    try:
        with Image.open(io.BytesIO(data)) as opened:
            fmt = opened.format or ""
            width, height = opened.size
            decoded = _reduce_on_load(opened, target, data)
            if decoded[0] * decoded[1] > limit:
                raise ImageTooLarge(width, height, limit)
            rotated = _exif_rotated(opened)
            opened.load()  # decodes it all: a truncated file fails here, not at the model
            if fmt in MODEL_MIME_TYPES and width * height <= target and not rotated:
                return PreparedImage(data, MODEL_MIME_TYPES[fmt], width, height)
            image = _scaled(opened, target)
            if rotated:
                ImageOps.exif_transpose(image, in_place=True)
    except UnidentifiedImageError:
        raise NotThatKind("image") from None
    except Image.DecompressionBombError:
        raise ImageTooLarge(width, height, limit) from None
    except (OSError, ValueError, SyntaxError):
        raise BrokenFile("image") from None
    keep_alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
    out = io.BytesIO()
    if keep_alpha:
        image.save(out, format="PNG", optimize=True)
        mime = "image/png"
    else:
        image.convert("RGB").save(out, format="JPEG", quality=_JPEG_QUALITY)
        mime = "image/jpeg"
    return PreparedImage(out.getvalue(), mime, image.width, image.height)


def _reduce_on_load(image: Any, target: int, data: bytes) -> tuple[int, int]:
    """Make ``image`` decode at a smaller scale where its format allows, still at least
    the size it will be scaled to: JPEG by DCT scaling (1/2, 1/4, 1/8; `draft`), JPEG 2000
    by resolution levels (`reduce`, at most as many as its codestream has: one more fails
    the decode). Other formats decode whole. The size it will decode at."""
    width, height = image.size
    if width * height <= target:
        return width, height
    scale = (target / (width * height)) ** 0.5
    wanted = (max(1, int(width * scale)), max(1, int(height * scale)))
    if image.format == "JPEG":
        image.draft(image.mode, wanted)
    elif image.format == "JPEG2000":
        factor, most = 0, _j2k_levels(data)
        while (
            factor < most
            and (width >> (factor + 1)) >= wanted[0]
            and (height >> (factor + 1)) >= wanted[1]
        ):
            factor += 1
        if factor:
            image.reduce = factor
            # Pillow sets the size only as it loads; computed here as it does it.
            power = 1 << factor
            return (width + power // 2) // power, (height + power // 2) // power
    return int(image.width), int(image.height)


def _j2k_levels(data: bytes) -> int:
    """How many times a JPEG 2000 codestream can be halved on load: the decomposition
    levels of its main header's COD segment (the least of it and any COC's); 0 when not
    found. Segments: marker (2 bytes), length (2, counting itself), then the parameters."""
    pos = data.find(b"\xff\x4f\xff\x51")  # SOC, then SIZ: the codestream's start
    if pos < 0:
        return 0
    pos += 2
    levels: list[int] = []
    while pos + 4 <= len(data) and data[pos] == 0xFF and data[pos + 1] != 0x90:  # to SOT
        marker, length = data[pos + 1], int.from_bytes(data[pos + 2 : pos + 4], "big")
        if marker == 0x52 and pos + 9 < len(data):  # COD: Scod, order, layers(2), MCT, levels
            levels.append(data[pos + 9])
        elif marker == 0x53 and pos + 6 < len(data):  # COC: component (1 byte), Scoc, levels
            levels.append(data[pos + 6])
        pos += 2 + length
    return min(levels, default=0)


def _scaled(image: Any, target: int) -> Any:
    """``image`` scaled to at most ``target`` pixels (a copy: the caller closes the
    original); reduced by whole factors first, which is faster and needs less memory."""
    from PIL import Image

    if image.width * image.height <= target:
        return image.copy()
    scale = (target / (image.width * image.height)) ** 0.5
    size = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)


def _exif_rotated(image: Any) -> bool:
    """Whether the photo's EXIF says to show it turned or mirrored."""
    try:
        return int(image.getexif().get(0x0112, 1)) not in (0, 1)
    except (OSError, ValueError, TypeError):
        return False
