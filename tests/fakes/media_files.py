"""Real media files made in the tests: a voice (OGG/Opus), a round video note (MP4 with
H.264 video and AAC sound), a JPEG and PNGs, PDFs with and without a text layer, a broken PDF,
PDFs crafted to cost pypdf minutes or hundreds of megabytes.

Made with the libraries membot reads them with (PyAV, Pillow, pypdf's writer) plus a
hand-written PDF, so a test reads files shaped as real clients send them, not mocks."""

from __future__ import annotations

import io
import math
import struct
import zlib
from functools import cache

import av
from PIL import Image

RATE = 48_000


def _tone(samples: int, start: int = 0, freq: float = 440.0) -> bytes:
    """``samples`` of a quiet sine tone as signed 16-bit mono PCM."""
    return b"".join(
        struct.pack("<h", int(6000 * math.sin(2 * math.pi * freq * (start + i) / RATE)))
        for i in range(samples)
    )


def _audio_frames(stream: av.audio.stream.AudioStream, seconds: float) -> list[av.AudioFrame]:
    size = stream.codec_context.frame_size or 960
    total = int(seconds * RATE)
    frames = []
    for offset in range(0, total, size):
        pcm = _tone(min(size, total - offset), offset)
        frame = av.AudioFrame(format="s16", layout="mono", samples=size)
        frame.planes[0].update(pcm + bytes(frame.planes[0].buffer_size - len(pcm)))
        frame.sample_rate = RATE
        frame.pts = offset
        frames.append(frame)
    return frames


@cache
def ogg_voice(seconds: float = 2.0) -> bytes:
    """A Telegram-style voice message: OGG/Opus, mono, 48 kHz, ``seconds`` long."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="ogg") as container:
        stream = container.add_stream("libopus", rate=RATE, layout="mono")
        for frame in _audio_frames(stream, seconds):
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return buffer.getvalue()


def ogg_voice_claiming(seconds: float, claimed: float) -> bytes:
    """An OGG/Opus voice ``seconds`` long whose pages claim it ends at ``claimed``: every
    page's granule position (what a reader takes the length from) rewritten, its CRC too."""
    data = bytearray(ogg_voice(seconds))
    pages = [i for i in range(len(data)) if data[i : i + 4] == b"OggS"]
    for n, start in enumerate(pages):
        end = pages[n + 1] if n + 1 < len(pages) else len(data)
        if n >= 2:  # after the two header pages; 312 is libopus's pre-skip
            struct.pack_into("<q", data, start + 6, int(claimed * RATE) + 312)
        struct.pack_into("<I", data, start + 22, 0)
        struct.pack_into("<I", data, start + 22, _ogg_crc(bytes(data[start:end])))
    return bytes(data)


def _ogg_crc(page: bytes) -> int:
    """The CRC-32 an OGG page carries (polynomial 0x04C11DB7, not reflected)."""
    crc = 0
    for byte in page:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7 if crc & 0x80000000 else crc << 1) & 0xFFFFFFFF
    return crc


@cache
def video_note(seconds: float = 2.0, *, sound: bool = True, side: int = 64) -> bytes:
    """A round video note as Telegram sends it: a square MP4, H.264 video, AAC sound."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=10)
        video.width = video.height = side
        video.pix_fmt = "yuv420p"
        audio = container.add_stream("aac", rate=RATE, layout="mono") if sound else None
        for index in range(max(1, int(seconds * 10))):
            frame = av.VideoFrame(side, side, "yuv420p")
            for plane in frame.planes:
                plane.update(bytes([(index * 7) % 256]) * plane.buffer_size)
            frame.pts = index
            container.mux(video.encode(frame))
        container.mux(video.encode(None))
        if audio is not None:
            for frame in _audio_frames(audio, seconds):
                container.mux(audio.encode(frame))
            container.mux(audio.encode(None))
    return buffer.getvalue()


def jpeg(width: int = 640, height: int = 480) -> bytes:
    """A JPEG photo of ``width`` x ``height`` (a colour gradient)."""
    return _image(width, height, "JPEG")


def png(width: int = 640, height: int = 480) -> bytes:
    return _image(width, height, "PNG")


def _image(width: int, height: int, fmt: str) -> bytes:
    image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def _pdf(pages: list[bytes], resources: bytes) -> bytes:
    """A minimal valid PDF (one content stream per page), with a correct xref table."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    for content in pages:
        stream_no = len(objects) + 2
        kids.append(f"{len(objects) + 1} 0 R".encode())
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
            + resources
            + f" /Contents {stream_no} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(pages))
    return _pdf_of(objects)


def _pdf_of(objects: list[bytes]) -> bytes:
    """A PDF of these objects (numbered from 1, the first the catalog), with its xref table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def _flate(content: bytes, entries: bytes = b"") -> bytes:
    """A stream object of ``content``, Flate-compressed, with these dictionary entries."""
    packed = zlib.compress(content, 9)
    return b"<< /Length %d /Filter /FlateDecode %s >>\nstream\n%s\nendstream" % (
        len(packed),
        entries,
        packed,
    )


_HELVETICA = b"/Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >>"


def pdf_slow(draws: int = 100, operators: int = 100_000) -> bytes:
    """A 2 KB PDF of one page that costs pypdf minutes: the page draws a form XObject
    ``draws`` times, and the form shows a letter ``operators`` times. pypdf parses and runs
    the form again at each draw (about 0.8 s per draw of 100,000 here), and each stream
    stays under its limit of tokens per stream."""
    page = b"BT /F1 12 Tf (Slow) Tj ET " + b"/X Do " * draws
    form = b"BT /F1 12 Tf " + b"(a) Tj " * operators + b"ET"
    return _pdf_of(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << "
            + _HELVETICA
            + b" /XObject << /X 5 0 R >> >> /Contents 4 0 R >>",
            _flate(page),
            _flate(
                form,
                b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << "
                + _HELVETICA
                + b" >>",
            ),
        ]
    )


def pdf_hungry(numbers: int = 1_900_000) -> bytes:
    """A 4 KB PDF of one page that is ``numbers`` numbers (under pypdf's limit of 2 million
    tokens per stream): pypdf holds each as an object, about 180 MB for the default."""
    content = b"BT /F1 12 Tf 72 720 Td (Hungry) Tj ET " + b"0 " * numbers
    return _pdf_of(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << "
            + _HELVETICA
            + b" >> /Contents 4 0 R >>",
            _flate(content),
        ]
    )


def pdf_with_text(*pages: str) -> bytes:
    """A PDF whose pages carry these texts in a text layer (Helvetica, one line each)."""
    font = b"<< /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >>"
    streams = []
    for text in pages or ("Hello from a PDF",):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        streams.append(b"BT /F1 12 Tf 72 720 Td (" + escaped.encode("latin-1") + b") Tj ET")
    return _pdf(streams, font)


def pdf_scanned(pages: int = 1) -> bytes:
    """A PDF of pages that are only a picture (a scan): no text layer at all."""
    pixels = zlib.compress(bytes(range(256)) * 3)  # 16 x 16 RGB: 768 bytes
    # An inline image (BI ... ID ... EI): a picture in the content stream, no text operator.
    inline = (
        b"q 200 0 0 200 72 500 cm BI /W 16 /H 16 /CS /RGB /BPC 8 /F /Fl ID " + pixels + b" EI Q"
    )
    return _pdf([inline] * pages, b"<< >>")


def pdf_broken() -> bytes:
    """The first bytes of a PDF and then garbage: what a cut-off download looks like."""
    return pdf_with_text("never read")[:60] + b"\x00\xff garbage \x13" * 20


@cache
def png_uniform(side: int) -> bytes:
    """A ``side`` x ``side`` PNG of one colour but a dot: a few hundred KB at most however
    many pixels (7,900 x 7,900: about 200 KB for 62 megapixels)."""
    image = Image.new("RGB", (side, side), (200, 200, 200))
    image.putpixel((1, 1), (0, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def pdf_nested(depth: int = 5000) -> bytes:
    """A 45 KB PDF of one page with text whose resources hold a dictionary nested ``depth``
    deep: pypdf cannot parse the page's objects, logs it and gives no text (a file it
    cannot read, not a scan without a text layer)."""
    nested = b"<< /A " * depth + b"1" + b" >>" * depth
    return _pdf_of(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << "
            + _HELVETICA
            + b" /X "
            + nested
            + b" >> /Contents 4 0 R >>",
            _flate(b"BT /F1 12 Tf 72 720 Td (Hidden) Tj ET"),
        ]
    )


def pdf_deep_arrays(depth: int = 5000) -> bytes:
    """A 600-byte PDF whose page's content holds arrays nested ``depth`` deep: pypdf
    recurses into them past Python's recursion limit."""
    content = b"BT /F1 12 Tf 72 720 Td (Deep) Tj ET " + b"[" * depth + b"]" * depth
    return _pdf_of(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << "
            + _HELVETICA
            + b" >> /Contents 4 0 R >>",
            _flate(content),
        ]
    )
