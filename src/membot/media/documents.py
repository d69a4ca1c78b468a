"""Documents a user sends: which kind they are, and their text.

Read: PDF (its text layer, with pypdf), and anything that is text — plain text, Markdown,
CSV, JSON, YAML, XML/HTML, source code. A kind is told by MIME type first and by the file
name's extension when the MIME type says nothing useful (Telegram sends source files as
`application/octet-stream`). Everything else is UnsupportedType.

The text is kept whole (searchable in chunks, text.chunk_text) and cut for the prompt
(text.cut_for_prompt). Parsing is CPU-bound: a text file is decoded in a worker thread, a
PDF read in a child process bounded in time and memory (media/pdf.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from membot.media.errors import TELEGRAM_DOWNLOAD_LIMIT, FileTooBig, UnsupportedType
from membot.media.pdf import PdfProcesses
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
    pdf: PdfProcesses | None = None,
) -> Document:
    """The text of a document, a PDF's read by ``pdf`` (by one child with the default
    bounds when None). Raises FileTooBig, UnsupportedType, BrokenFile or NoTextLayer; the
    message of none of them quotes the file."""
    if len(data) > max_bytes:
        raise FileTooBig(len(data), max_bytes)
    kind = classify(mime_type, file_name)
    started = time.perf_counter()
    if kind == "pdf":
        text, pages = await (pdf or PdfProcesses(processes=1)).text(data)
        document = Document(kind="pdf", text=text, size=len(data), pages=pages)
    else:
        text = await asyncio.to_thread(decode_text, data)
        document = Document(kind="text", text=text, size=len(data))
    log.info(
        "document read: kind=%s size=%d pages=%s chars=%d took=%.3fs",
        kind,
        len(data),
        document.pages,
        len(document.text),
        time.perf_counter() - started,
    )
    return document
