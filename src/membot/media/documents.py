"""Documents a user sends: which kind they are, and their text.

Read: PDF (its text layer, with pypdf), and anything that is text — plain text, Markdown,
CSV, JSON, YAML, XML/HTML, source code. A kind is told by MIME type first and by the file
name's extension when the MIME type says nothing useful (Telegram sends source files as
`application/octet-stream`). Everything else is UnsupportedType.

The text is kept whole (searchable in chunks, text.chunk_text) and cut for the prompt
(text.cut_for_prompt). Parsing is CPU-bound: read_document runs it in a worker thread."""

from __future__ import annotations

import asyncio
import io
import logging
import time
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from membot.media.errors import (
    TELEGRAM_DOWNLOAD_LIMIT,
    BrokenFile,
    FileTooBig,
    NoTextLayer,
    UnsupportedType,
)
from membot.media.text import decode_text

log = logging.getLogger(__name__)

DocumentKind = Literal["pdf", "text"]

_TEXT_MIME_TYPES = frozenset(
    {
        "application/json",
        "application/ld+json",
        "application/x-ndjson",
        "application/jsonl",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/javascript",
        "application/x-javascript",
        "application/typescript",
        "application/x-sh",
        "application/x-shellscript",
        "application/x-python",
        "application/x-python-code",
        "application/sql",
        "application/x-tex",
        "application/x-subrip",
        "application/csv",
    }
)
_TEXT_SUFFIXES = frozenset(
    " ".join(
        (
            ".txt .text .md .markdown .rst .org .csv .tsv .json .jsonl .ndjson .yaml .yml",
            ".toml .ini .cfg .conf .env .xml .html .htm .css .scss .svg .tex .log .srt .vtt",
            ".sql .py .pyi .js .mjs .cjs .ts .tsx .jsx .java .kt .kts .scala .go .rs .c .h",
            ".cc .cpp .hpp .cs .swift .m .rb .php .pl .lua .r .jl .dart .ex .exs .erl .hs .ml",
            ".clj .sh .bash .zsh .fish .ps1 .bat .cmd .dockerfile .makefile .gradle",
            ".properties .proto .graphql .vue .svelte .diff .patch .ipynb",
        )
    ).split(" ")
)
#: The longest reading a PDF's text may take. A small crafted PDF (thousands of pages that
#: share one compressed content stream: 400 KB, 2,000 pages) costs pypdf a CPU-second per
#: 100 pages, and a worker thread cannot be stopped; pages past this are not read, and
#: the text says so. A few hundred ordinary pages are read well within it.
PDF_READ_SECONDS = 60.0
_TEXT_NAMES = frozenset({"dockerfile", "makefile", "readme", "license", "changelog"})
#: Types that say nothing about the contents: the name decides.
_VAGUE_MIME_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
_IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff"})


@dataclass(frozen=True, slots=True)
class Document:
    """A document's text. ``pages`` is the PDF's page count (None for text files)."""

    kind: DocumentKind
    text: str
    size: int
    pages: int | None = None


def is_image(mime_type: str | None, file_name: str | None) -> bool:
    """Whether a document is an image sent as a file (shown like a photo, not read): by its
    MIME type, or by its name when the type says nothing. The one test of both front doors
    and the turn, so a file the door lets through as an image is one to the turn too."""
    mime = (mime_type or "").split(";")[0].strip().lower()
    suffix = PurePosixPath((file_name or "").lower()).suffix
    return mime.startswith("image/") or (mime in _VAGUE_MIME_TYPES and suffix in _IMAGE_SUFFIXES)


def classify(mime_type: str | None, file_name: str | None) -> DocumentKind:
    """The kind of document a MIME type and file name describe. Raises UnsupportedType."""
    mime = (mime_type or "").split(";")[0].strip().lower()
    path = PurePosixPath((file_name or "").lower())
    if mime == "application/pdf" or (mime in _VAGUE_MIME_TYPES and path.suffix == ".pdf"):
        return "pdf"
    if mime.startswith("text/") or mime in _TEXT_MIME_TYPES or mime.endswith(("+json", "+xml")):
        return "text"
    if mime in _VAGUE_MIME_TYPES and (path.suffix in _TEXT_SUFFIXES or path.name in _TEXT_NAMES):
        return "text"
    raise UnsupportedType(mime or None)


async def read_document(
    data: bytes,
    *,
    mime_type: str | None,
    file_name: str | None,
    max_bytes: int = TELEGRAM_DOWNLOAD_LIMIT,
    pdf_seconds: float = PDF_READ_SECONDS,
) -> Document:
    """The text of a document (a PDF's pages read within ``pdf_seconds``). Raises
    FileTooBig, UnsupportedType, BrokenFile or NoTextLayer; the message of none of them
    quotes the file."""
    if len(data) > max_bytes:
        raise FileTooBig(len(data), max_bytes)
    kind = classify(mime_type, file_name)
    started = time.perf_counter()
    document = await asyncio.to_thread(_read, kind, data, pdf_seconds)
    log.info(
        "document read: kind=%s size=%d pages=%s chars=%d took=%.3fs",
        kind,
        len(data),
        document.pages,
        len(document.text),
        time.perf_counter() - started,
    )
    return document


def _read(kind: DocumentKind, data: bytes, pdf_seconds: float) -> Document:
    if kind == "pdf":
        text, pages = _pdf_text(data, pdf_seconds)
        return Document(kind="pdf", text=text, size=len(data), pages=pages)
    return Document(kind="text", text=decode_text(data), size=len(data))


def _pdf_text(data: bytes, seconds: float) -> tuple[str, int]:
    """The text layer of each page, pages apart by a blank line; the pages not read within
    ``seconds`` (at least one is) left out with a note. A PDF that is encrypted with a
    password, or that pypdf cannot parse, is BrokenFile; one whose pages carry no text is
    NoTextLayer."""
    # Imported here: pypdf is needed only when a PDF arrives, not at every start-up.
    from pypdf import PdfReader

    deadline = time.monotonic() + seconds
    texts: list[str] = []
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise BrokenFile("pdf")
        pages = len(reader.pages)
        for page in reader.pages:
            if texts and time.monotonic() > deadline:
                break
            texts.append((page.extract_text() or "").strip())
    except BrokenFile:
        raise
    except Exception:
        # pypdf raises its own errors, but on a damaged file also ValueError, KeyError,
        # TypeError, ... from deep inside: any of them means "cannot be read".
        raise BrokenFile("pdf") from None
    if not texts:
        raise BrokenFile("pdf")
    text = "\n\n".join(t for t in texts if t)
    if not text:
        raise NoTextLayer(pages)
    if len(texts) < pages:
        log.warning("document: PDF read for too long; %d of %d pages read", len(texts), pages)
        text += (
            f"\n\n[Only the first {len(texts)} of {pages} pages were read: reading took too long.]"
        )
    return text, pages
