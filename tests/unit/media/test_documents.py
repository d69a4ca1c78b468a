"""Documents: what is read, what is refused with which error, how text is decoded, kept
in chunks and cut for the prompt. Real PDFs made in the tests."""

from __future__ import annotations

import logging
import random
import time

import pytest

from membot.media.documents import Document, classify, read_document
from membot.media.errors import (
    BrokenFile,
    FileTooBig,
    MediaError,
    NoTextLayer,
    NotThatKind,
    TooComplex,
    UnsupportedType,
)
from membot.media.pdf import PdfProcesses
from membot.media.text import cut_for_prompt, decode_text
from membot.textcut import chunk_text
from tests.fakes import media_files

SECRET = "deposit is 1500 EUR"


async def test_a_pdf_text_layer_is_read_page_by_page() -> None:
    pdf = media_files.pdf_with_text("The contract says", f"the {SECRET}")
    document = await read_document(pdf, mime_type="application/pdf", file_name="c.pdf")
    assert document == Document(
        kind="pdf", text=f"The contract says\n\nthe {SECRET}", size=len(pdf), pages=2
    )


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (media_files.pdf_scanned(2), NoTextLayer, "PDF of 2 page(s) without a text layer"),
        (media_files.pdf_broken(), BrokenFile, "broken pdf file"),
        (b"", BrokenFile, "broken pdf file"),
    ],
    ids=["scanned", "broken", "empty"],
)
async def test_a_pdf_that_cannot_be_read_says_why(
    data: bytes, error: type[MediaError], message: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG), pytest.raises(error) as failed:
        await read_document(data, mime_type="application/pdf", file_name="scan.pdf")
    assert str(failed.value) == message


async def test_a_file_over_20_mb_is_refused_before_it_is_read() -> None:
    data = b"%PDF" + b"\0" * (20 * 1024 * 1024)
    with pytest.raises(FileTooBig) as refused:
        await read_document(data, mime_type="application/pdf", file_name="big.pdf")
    assert refused.value.size == len(data) and refused.value.limit == 20 * 1024 * 1024


async def test_an_unknown_type_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedType) as refused:
        await read_document(b"PK\x03\x04", mime_type="application/zip", file_name="a.zip")
    assert str(refused.value) == "unsupported file type application/zip"


@pytest.mark.parametrize(
    ("mime", "name", "kind"),
    [
        ("application/pdf", "x", "pdf"),
        ("application/octet-stream", "Report.PDF", "pdf"),
        ("text/plain", "notes.txt", "text"),
        ("text/markdown", "README.md", "text"),
        ("text/csv", "t.csv", "text"),
        ("application/json", "data.json", "text"),
        ("application/vnd.api+json", "x", "text"),
        ("text/x-python; charset=utf-8", "bot.py", "text"),
        ("application/octet-stream", "main.rs", "text"),
        (None, "Dockerfile", "text"),
        ("", "script.sh", "text"),
    ],
)
def test_kinds_are_told_by_mime_type_then_by_name(mime: str | None, name: str, kind: str) -> None:
    assert classify(mime, name) == kind


@pytest.mark.parametrize(
    ("mime", "name"),
    [
        ("image/png", "a.png"),
        ("application/zip", "a.zip"),
        ("application/octet-stream", "program.exe"),
        (None, None),
        # A declared type wins over a misleading name.
        ("application/x-msdownload", "notes.txt"),
    ],
)
def test_what_is_not_a_document_is_unsupported(mime: str | None, name: str | None) -> None:
    with pytest.raises(UnsupportedType):
        classify(mime, name)


async def test_text_files_of_every_common_encoding_are_read() -> None:
    russian = "Договор: залог 1500 евро"
    cases = [
        ("привет, world".encode(), "привет, world"),
        (b"\xef\xbb\xbfwith BOM", "with BOM"),
        ("utf-16 текст".encode("utf-16"), "utf-16 текст"),
        (russian.encode("cp1251"), russian),
        ("café crème".encode("cp1252"), "café crème"),
    ]
    for data, text in cases:
        assert decode_text(data) == text
        document = await read_document(data, mime_type="text/plain", file_name="t.txt")
        assert document.text == text and document.kind == "text"


def test_bytes_of_no_encoding_are_not_text() -> None:
    # Bytes valid in no encoding tried (0x81 and 0x98 are holes of cp1252, 0x98 of cp1251).
    with pytest.raises(NotThatKind):
        decode_text(b"abc \x98\x81 def")


@pytest.mark.parametrize(
    "data",
    [
        random.Random(3).randbytes(3000),
        b"an ordinary line\0 of text, with one NUL in it",
        b"a line with a bell \a and backspaces \b\b\b" * 2,
        "UTF-16 with a NUL\0".encode("utf-16"),
    ],
    ids=["random-bytes", "one-nul", "controls", "utf16-nul"],
)
async def test_what_is_not_text_is_refused_as_not_text_whatever_its_name(data: bytes) -> None:
    with pytest.raises(NotThatKind) as refused:
        await read_document(data, mime_type="application/octet-stream", file_name="notes.txt")
    assert refused.value.kind == "text"


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ("ok: привет".encode()[:-1], "ok: приве"),  # cut in the middle of its last letter
        (b"\x1b[31merror\x1b[0m in a coloured log\n", "\x1b[31merror\x1b[0m in a coloured log\n"),
        (b"columns\tand\fpages\r\n", "columns\tand\fpages\r\n"),
        (b"", ""),
    ],
    ids=["cut-utf8", "ansi-log", "tabs-and-form-feeds", "empty"],
)
def test_text_with_what_text_files_hold_is_text(data: bytes, text: str) -> None:
    assert decode_text(data) == text


@pytest.mark.parametrize(
    "data", [media_files.pdf_nested(), media_files.pdf_deep_arrays()], ids=["dicts", "arrays"]
)
async def test_a_deeply_nested_pdf_is_too_complex_not_without_a_text_layer(data: bytes) -> None:
    with pytest.raises(TooComplex) as refused:
        await read_document(data, mime_type="application/pdf", file_name="deep.pdf")
    assert not isinstance(refused.value, NoTextLayer)


async def test_a_binary_file_named_text_is_not_text_not_garbage() -> None:
    with pytest.raises(NotThatKind) as failed:
        await read_document(b"\0\1\2\0" * 100, mime_type="text/plain", file_name="a.txt")
    assert str(failed.value) == "not text: the file is something else"


async def test_a_pdf_that_takes_too_long_is_read_as_far_as_time_allows_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Pages are read one after another for half of MEDIA_PDF_TIMEOUT (the child is killed
    # at all of it); with no time left after the first page, the rest are left out and the
    # text says so. (The first page is always read.)
    pdf = media_files.pdf_with_text("First page.", "Second page.", "Third page.")
    with caplog.at_level(logging.INFO, logger="membot.media"):
        document = await read_document(
            pdf, mime_type="application/pdf", file_name="a.pdf", pdf=PdfProcesses(page_seconds=0)
        )
    assert document.pages == 3
    assert document.text == (
        "First page.\n\n[Only the first of 3 pages was read: reading took too long.]"
    )
    assert "1 of 3 pages read" in caplog.text and "First page" not in caplog.text
    whole = await read_document(pdf, mime_type="application/pdf", file_name="a.pdf")
    assert whole.text == "First page.\n\nSecond page.\n\nThird page."


def test_long_text_is_chunked_at_boundaries_and_nothing_is_lost() -> None:
    paragraphs = [f"Paragraph {n}: " + "word " * 40 for n in range(30)]
    text = "\n\n".join(p.strip() for p in paragraphs)
    chunks = chunk_text(text, 500)
    assert all(len(chunk) <= 500 for chunk in chunks) and len(chunks) > 1
    assert " ".join(chunks).split() == text.split()
    assert all(chunk.startswith("Paragraph") or chunk.startswith("word") for chunk in chunks)
    assert chunk_text("short", 500) == ["short"] and chunk_text("  \n ", 10) == []
    assert chunk_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def test_a_document_of_20_mb_is_chunked_in_linear_time() -> None:
    # The largest text a user may send (Telegram's 20 MB) as the index's 600-character
    # pieces. Cutting by copying the rest each time took about 8 s of CPU; CPU time, not
    # wall time, so a busy machine does not fail it.
    text = "word " * (4 * 1024 * 1024)
    started = time.process_time()
    chunks = chunk_text(text, 600)
    assert time.process_time() - started < 2.0
    assert len(chunks) == 34_953 and chunks[-1].endswith("word")


def test_the_prompt_gets_the_head_of_a_long_document_and_a_note() -> None:
    text = " ".join(f"w{n}" for n in range(10_000))
    cut, was_cut = cut_for_prompt(text, 1_000)
    head, note = cut.split("\n\n[", 1)
    assert was_cut and len(head) <= 1_000 and text.startswith(head)
    assert f"{len(head)} of {len(text)} characters" in note and "search_history" in note
    assert cut_for_prompt("short text", 1_000) == ("short text", False)


async def test_logs_carry_sizes_never_the_text(caplog: pytest.LogCaptureFixture) -> None:
    pdf = media_files.pdf_with_text(SECRET)
    with caplog.at_level(logging.DEBUG, logger="membot"):
        await read_document(pdf, mime_type="application/pdf", file_name="c.pdf")
        await read_document(SECRET.encode(), mime_type="text/plain", file_name="n.txt")
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("membot")]
    assert any(f"size={len(pdf)}" in m and "pages=1" in m for m in messages)
    assert not any(SECRET in m for m in messages)
