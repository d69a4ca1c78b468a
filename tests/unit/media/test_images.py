"""Images for a vision model: the photo size fetched, image documents made small enough, and
the part that carries them (a data: URL of the bytes, never a link). Real JPEGs and PNGs."""

from __future__ import annotations

import asyncio
import base64
import io
import sys
import traceback

import pytest
from PIL import Image

from membot.media.errors import BrokenFile, FileTooBig, ImageTooLarge, NotThatKind
from membot.media.images import (
    ImageDecoder,
    PhotoSize,
    PreparedImage,
    choose_photo,
    image_part,
    prepare_image,
)
from tests.fakes import media_files

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
    with pytest.raises(NotThatKind):
        await prepare_image(b"this is a text file, not a picture")
    with pytest.raises(FileTooBig):
        await prepare_image(b"\xff\xd8" + b"\0" * (20 * 1024 * 1024))


async def test_a_png_of_62_megapixels_is_too_large_from_its_header_not_damaged() -> None:
    # 7,900 x 7,900 is about 200 KB of PNG and 250 MB decoded: refused before decoding.
    huge = media_files.png_uniform(7900)
    with pytest.raises(ImageTooLarge) as refused:
        await prepare_image(huge)
    assert (refused.value.width, refused.value.height) == (7900, 7900)
    assert refused.value.limit == 25_000_000 and not isinstance(refused.value, BrokenFile)
    with pytest.raises(ImageTooLarge):
        await ImageDecoder(max_pixels=10_000_000).prepare(media_files.png_uniform(4000))


async def test_a_jpeg_over_the_pixel_bound_is_decoded_at_a_reduced_scale() -> None:
    # 30 megapixels over a bound of 25: a JPEG is decoded at 1/4 (draft), then scaled.
    image = await ImageDecoder().prepare(media_files.jpeg(6000, 5000))
    assert image.mime_type == "image/jpeg" and image.width * image.height <= 1600 * 1600
    assert image.width / image.height == pytest.approx(1.2, rel=0.01)
    # With a bound under even its 1/8 scale, it is too large too.
    with pytest.raises(ImageTooLarge):
        await ImageDecoder(max_pixels=1_000_000).prepare(media_files.jpeg(6000, 5000))


def _jpeg2000(side: int, levels: int) -> bytes:
    """A JPEG 2000 of `side` x `side` pixels whose codestream can be halved `levels` times."""
    out = io.BytesIO()
    Image.new("RGB", (side, side), (120, 30, 200)).save(
        out, format="JPEG2000", irreversible=True, num_resolutions=levels + 1
    )
    return out.getvalue()


async def test_a_jpeg_2000_is_read_at_the_scale_its_levels_allow() -> None:
    # Halved on load as far as its codestream allows: 3,000 px over a bound of 4 Mpx is
    # read at 1,500 px, not refused.
    decoder = ImageDecoder(max_pixels=4_000_000, target_pixels=400 * 400)
    image = await decoder.prepare(_jpeg2000(3000, levels=5))
    assert image.width * image.height <= 400 * 400 and image.width == image.height
    # One with no levels to halve is read whole (not "damaged"), and refused when that
    # is over the bound.
    image = await decoder.prepare(_jpeg2000(1800, levels=0))
    assert image.width * image.height <= 400 * 400
    with pytest.raises(ImageTooLarge):
        await decoder.prepare(_jpeg2000(3000, levels=0))


def _decoding_threads() -> int:
    """Threads whose stack is in the decode of membot/media/images.py right now."""
    count = 0
    for frame in sys._current_frames().values():
        stack = traceback.extract_stack(frame)
        count += any(f.name == "_prepare" and f.filename.endswith("images.py") for f in stack)
    return count


async def test_at_most_media_image_decodes_images_are_decoded_at_once() -> None:
    decoder = ImageDecoder(decodes=2)
    png = media_files.png_uniform(4000)
    decodes = [asyncio.create_task(decoder.prepare(png)) for _ in range(5)]
    seen: set[int] = set()
    while not all(d.done() for d in decodes):
        seen.add(_decoding_threads())
        await asyncio.sleep(0.002)  # a sampling interval, not a synchronisation
    assert [(await d).width for d in decodes] == [1600] * 5
    assert max(seen) == 2


async def test_a_cancelled_decode_keeps_its_slot_until_its_thread_ends() -> None:
    # An API client that disconnects cancels its request, but not the decode's thread:
    # the decode still counts against MEDIA_IMAGE_DECODES until it ends, so clients that
    # send an image and hang up cannot stack decodes past the bound.
    decoder = ImageDecoder(decodes=1)
    png = media_files.png_uniform(4000)
    first = asyncio.create_task(decoder.prepare(png))
    deadline = asyncio.get_running_loop().time() + 10
    while _decoding_threads() == 0:
        assert asyncio.get_running_loop().time() < deadline, "the decode never started"
        await asyncio.sleep(0.002)  # polling a condition, with a deadline
    first.cancel()
    second = asyncio.create_task(decoder.prepare(png))
    seen: set[int] = set()
    while not second.done():
        seen.add(_decoding_threads())
        await asyncio.sleep(0.002)  # a sampling interval, not a synchronisation
    assert (await second).width == 1600 and first.cancelled()
    assert max(seen) == 1
