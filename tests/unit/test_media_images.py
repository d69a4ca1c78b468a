"""Images for a vision model: the photo size fetched, image documents made small enough, and
the part that carries them (a data: URL of the bytes, never a link). Real JPEGs and PNGs."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image
from tests import media_files

from membot.media.errors import BrokenFile, FileTooBig, UnsupportedType
from membot.media.images import PhotoSize, PreparedImage, choose_photo, image_part, prepare_image

TELEGRAM_SIZES = [
    PhotoSize("s", 90, 67, 1_500),
    PhotoSize("m", 320, 240, 15_000),
    PhotoSize("x", 1280, 960, 120_000),
    PhotoSize("y", 2560, 1920, 480_000),
]


def test_the_largest_photo_size_under_the_cap_is_fetched() -> None:
    assert choose_photo(TELEGRAM_SIZES, max_pixels=1600 * 1600).file_id == "x"
    assert choose_photo(TELEGRAM_SIZES, max_pixels=3000 * 3000).file_id == "y"
    assert choose_photo(TELEGRAM_SIZES, max_pixels=100 * 100).file_id == "s"
    # Every size over the cap: the smallest, which is still something to look at.
    assert choose_photo(TELEGRAM_SIZES[2:], max_pixels=100 * 100).file_id == "x"
    # A size Telegram would not let the bot download is never chosen.
    huge = [PhotoSize("a", 800, 600, 50_000), PhotoSize("b", 1000, 1000, 21 * 1024 * 1024)]
    assert choose_photo(huge).file_id == "a"
    with pytest.raises(ValueError):
        choose_photo([])


def test_the_part_is_a_data_url_of_the_bytes_themselves() -> None:
    jpeg = media_files.jpeg(64, 48)
    part = image_part(PreparedImage(jpeg, "image/jpeg", 64, 48))
    url = part["image_url"]["url"]
    assert part["type"] == "image_url" and url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == jpeg


async def test_a_photo_within_the_cap_is_sent_as_it_came() -> None:
    jpeg = media_files.jpeg(640, 480)
    image = await prepare_image(jpeg)
    assert image == PreparedImage(jpeg, "image/jpeg", 640, 480)


async def test_a_large_image_document_is_scaled_down_under_the_cap() -> None:
    image = await prepare_image(media_files.jpeg(3000, 2000), max_pixels=1000 * 1000)
    assert image.mime_type == "image/jpeg" and image.width * image.height <= 1000 * 1000
    assert image.width / image.height == pytest.approx(1.5, rel=0.01)
    with Image.open(io.BytesIO(image.data)) as decoded:
        assert (decoded.format, decoded.size) == ("JPEG", (image.width, image.height))


async def test_transparency_is_kept_and_other_formats_become_jpeg() -> None:
    rgba = Image.new("RGBA", (2000, 1000), (255, 0, 0, 128))
    gif = Image.new("P", (50, 50))
    buffers = {}
    for name, picture, fmt in (("rgba", rgba, "PNG"), ("gif", gif, "GIF"), ("bmp", rgba, "BMP")):
        buffers[name] = io.BytesIO()
        (picture.convert("RGB") if fmt == "BMP" else picture).save(buffers[name], format=fmt)
    transparent = await prepare_image(buffers["rgba"].getvalue(), max_pixels=500_000)
    assert transparent.mime_type == "image/png"
    assert transparent.width * transparent.height <= 500_000
    assert (await prepare_image(buffers["gif"].getvalue())).mime_type == "image/jpeg"
    assert (await prepare_image(buffers["bmp"].getvalue())).mime_type == "image/jpeg"


async def test_broken_unknown_and_too_big_images_are_refused() -> None:
    with pytest.raises(BrokenFile):
        await prepare_image(media_files.jpeg(640, 480)[:2000])
    with pytest.raises(UnsupportedType):
        await prepare_image(b"this is a text file, not a picture")
    with pytest.raises(FileTooBig):
        await prepare_image(b"\xff\xd8" + b"\0" * (20 * 1024 * 1024))
