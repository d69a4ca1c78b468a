"""A PDF's text, read in a process of its own that is killed when it takes too long.

pypdf is pure Python, and one crafted page (a content stream of millions of operators, a
few kilobytes that inflate to a gigabyte of tokens) can hold a CPU core for minutes and
take gigabytes. A thread cannot be stopped, so each PDF is read by a short-lived child
(membot.media.pdf_child): started with asyncio (the loop never blocks on it), handed the
bytes on stdin, killed at ``seconds`` of wall time and, on Linux, refused memory past
``memory_mb`` (RLIMIT_AS in the child; not bounded elsewhere). A ProcessPoolExecutor
cannot kill one task, only be torn down with every other task in it; one process per
document needs no such rebuild: a killed child took nothing with it, and the next PDF gets
a new one. Starting one costs about a tenth of a second (an interpreter and pypdf), little
beside a document worth reading.

At most ``processes`` children run at once (the CPU count by default): a burst of PDFs
waits for a slot instead of starting a process each. Every child is awaited by the read
that started it, and `aclose` kills those still running (shutdown).

The child gets an empty environment and `-I`: the bytes and its limits, none of the bot's
settings or tokens."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import sys
from pathlib import Path

from membot.media.errors import BrokenFile, NoTextLayer, TooComplex

log = logging.getLogger(__name__)

# Run by its path, not `-m`: it imports nothing of membot, so it runs wherever this
# interpreter has pypdf, membot installed or not (`-I` ignores PYTHONPATH).
_CHILD = str(Path(__file__).with_name("pdf_child.py"))


class PdfProcesses:
    """Reads PDFs' text in child processes (see the module's docstring). ``page_seconds``
    is how long the child reads page after page before it leaves the rest out with a note
    (half of ``seconds`` by default: time left for the page in progress to finish)."""

    def __init__(
        self,
        *,
        seconds: float = 20.0,
        memory_mb: int = 1024,
        processes: int = 0,
        page_seconds: float | None = None,
    ) -> None:
        self.seconds = seconds
        self.page_seconds = seconds / 2 if page_seconds is None else page_seconds
        self.memory = memory_mb * 1024 * 1024
        self.processes = processes or os.cpu_count() or 1
        self._slots = asyncio.Semaphore(self.processes)
        self._running: set[asyncio.subprocess.Process] = set()
        self._closed = False

    async def text(self, data: bytes) -> tuple[str, int]:
        """The text layer of each page, pages apart by a blank line, and the page count.
        Raises BrokenFile (damaged, encrypted with a password), TooComplex (nested too
        deeply, over the time or memory bound) or NoTextLayer."""
        async with self._slots:
            if self._closed:
                raise BrokenFile("pdf")
            status, pages, read, text = await self._run(data)
        if status != "ok":
            if status not in ("broken", "encrypted", "complex"):  # the file's, not a bound
                log.warning("document: PDF not read: %s (%d pages)", status, pages)
            if status == "complex" or status == "memory" or status.startswith("killed"):
                raise TooComplex(status)
            raise BrokenFile("pdf")
        if not text:
            raise NoTextLayer(pages)
        if read < pages:
            log.warning("document: PDF read for too long; %d of %d pages read", read, pages)
            first = "first of" if read == 1 else f"first {read} of"
            was = "was" if read == 1 else "were"
            text += f"\n\n[Only the {first} {pages} pages {was} read: reading took too long.]"
        return text, pages

    async def _run(self, data: bytes) -> tuple[str, int, int, str]:
        # The CPU bound is a backstop for a child whose parent is gone (no one to kill it).
        cpu = math.ceil(self.seconds) + 1
        args = (str(self.page_seconds), str(self.memory), str(cpu))
        child = await asyncio.create_subprocess_exec(
            *(sys.executable, "-I", _CHILD, *args),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,  # a crash's traceback only: pypdf's warnings are off
            env={},
        )
        self._running.add(child)
        log.debug("document: PDF reader started, pid=%d", child.pid)
        try:
            async with asyncio.timeout(self.seconds):
                out, err = await child.communicate(data)
        except TimeoutError:
            return f"killed after {self.seconds:g} s", 0, 0, ""
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()
            self._running.discard(child)
        head, _, body = out.partition(b"\n")
        try:
            report = json.loads(head)
            status, pages, read = str(report["status"]), int(report["pages"]), int(report["read"])
        except (ValueError, KeyError, TypeError):
            # No report: the child died (a signal, RLIMIT_CPU, the OOM killer, shutdown) or
            # could not start; the last line of a traceback says which (never the file's text:
            # the child catches every error of reading).
            last = err.decode("utf-8", "replace").strip().rpartition("\n")[2][:200]
            return f"reader exited with {child.returncode} {last}".rstrip(), 0, 0, ""
        return status, pages, read, body.decode("utf-8", "replace")

    async def aclose(self) -> None:
        """Kill the children still reading and wait for them; later reads are BrokenFile."""
        self._closed = True
        running = list(self._running)
        for child in running:
            if child.returncode is None:
                child.kill()
        for child in running:
            await child.wait()
