"""PDFs are read in child processes bounded in time and memory (media/pdf.py): a PDF
crafted to cost pypdf minutes or hundreds of megabytes is refused like a broken one, the
next PDF reads as usual, a burst waits for a slot, shutdown kills what still reads. Real
children reading real PDFs made in the tests; nothing of ours replaced."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import time
from collections.abc import Iterator

import pytest

from membot.media.errors import BrokenFile, TooComplex
from membot.media.pdf import PdfProcesses
from tests.fakes import media_files

# pdf_slow() costs pypdf about 0.8 s per draw on this machine's cores: 100 draws are over a
# minute, far past the test's timeout and the generous bound on how long the refusal takes.
SLOW_DRAWS = 100
# The timeout also covers a child's start (Python and pypdf imported): 5 s leaves room for a
# loaded machine (the suite runs in parallel) where 2 s killed the normal PDF's reader too.
TIMEOUT = 5.0


class Started(logging.Handler):
    """Sets an event when a PDF child is started, and keeps its pid (from the DEBUG log)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.event = asyncio.Event()
        self.pids: list[int] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r"PDF reader started, pid=(\d+)", record.getMessage())
        if found:
            self.pids.append(int(found.group(1)))
            self.event.set()


@pytest.fixture
def started() -> Iterator[Started]:
    handler = Started()
    logger = logging.getLogger("membot.media.pdf")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_a_pdf_too_slow_to_read_is_killed_at_the_timeout_and_the_next_one_reads(
    started: Started, caplog: pytest.LogCaptureFixture
) -> None:
    pdf = PdfProcesses(seconds=TIMEOUT, processes=1)
    done: list[str] = []

    async def read(name: str, data: bytes) -> tuple[str, int]:
        try:
            return await pdf.text(data)
        finally:
            done.append(name)

    began = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="membot.media"):
        slow, normal = await asyncio.gather(
            read("slow", media_files.pdf_slow(SLOW_DRAWS)),
            read("normal", media_files.pdf_with_text("Still reading.")),
            return_exceptions=True,
        )
    assert (
        isinstance(slow, TooComplex)
        and str(slow) == f"PDF too complex to read: killed after {TIMEOUT:g} s"
    )
    assert f"PDF not read: killed after {TIMEOUT:g} s" in caplog.text
    # One child at a time: the normal PDF waited for the slow one's slot, then read.
    assert done == ["slow", "normal"] and normal == ("Still reading.", 1)
    # Refused within about the timeout (plus the normal read), not the minute pypdf needs.
    assert time.perf_counter() - began < 20
    assert len(started.pids) == 2 and all(gone(pid) for pid in started.pids)


async def test_the_slow_pdf_is_a_real_pdf_that_reads_when_small() -> None:
    # The same PDF with one short draw reads: it is refused for its time, not its shape.
    text, pages = await PdfProcesses(seconds=30).text(media_files.pdf_slow(1, 10))
    assert (text, pages) == ("Slow\n" + "a" * 10, 1)


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux only")
async def test_a_pdf_that_needs_more_memory_than_allowed_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pdf = PdfProcesses(seconds=60, memory_mb=128)
    with caplog.at_level(logging.WARNING, logger="membot.media"), pytest.raises(BrokenFile):
        await pdf.text(media_files.pdf_hungry())
    assert "PDF not read: memory" in caplog.text
    assert await pdf.text(media_files.pdf_with_text("Small.")) == ("Small.", 1)


async def test_shutdown_kills_a_child_still_reading_and_reads_no_more(started: Started) -> None:
    pdf = PdfProcesses(seconds=600)
    reading = asyncio.create_task(pdf.text(media_files.pdf_slow(SLOW_DRAWS)))
    await started.event.wait()
    [pid] = started.pids
    # The child knows the bytes and its limits: no environment (tokens, settings) at all.
    with open(f"/proc/{pid}/environ", "rb") as environ:
        assert environ.read() == b""
    await pdf.aclose()
    assert gone(pid)
    with pytest.raises(BrokenFile):
        await reading
    with pytest.raises(BrokenFile):
        await pdf.text(media_files.pdf_with_text("Too late."))
    assert started.pids == [pid]  # no child started after shutdown


async def test_a_read_cancelled_kills_its_child_and_frees_its_slot(started: Started) -> None:
    # A turn cancelled while its PDF is read (shutdown's grace over, a client gone) leaves
    # no child reading on, and the one slot is free for the next PDF.
    pdf = PdfProcesses(seconds=600, processes=1)
    reading = asyncio.create_task(pdf.text(media_files.pdf_slow(SLOW_DRAWS)))
    await started.event.wait()
    [pid] = started.pids
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert gone(pid)
    assert await pdf.text(media_files.pdf_with_text("Next.")) == ("Next.", 1)
