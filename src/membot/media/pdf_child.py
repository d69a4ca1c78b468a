"""The process that reads one PDF's text layer (membot.media.pdf starts it, one per PDF).

    python -I .../membot/media/pdf_child.py <page seconds> <memory bytes> <cpu seconds>

stdin: the PDF's bytes. stdout: one line of JSON, ``{"status": ..., "pages": N, "read": n}``,
then the text of the pages read, UTF-8, pages apart by a blank line. Status is "ok",
"encrypted" (a password is needed), "broken" (pypdf cannot parse it), "complex" (nested
deeper than pypdf follows, or pages whose text pypdf gave up on and no text anywhere) or
"memory" (over the memory bound). Pages are read one after another until ``page seconds``
have passed (at least one is); the parent kills this process if it is still running at its
own, later bound.

It imports the standard library and pypdf only, and is started with an empty environment
and `-I` (no PYTHON* variables, no user site): it knows the bytes and its limits, nothing of
the bot's settings or tokens. pypdf's warnings (logging and `warnings`) are counted, never
written: a crafted file can make millions, and stderr is left for a crash's traceback. A
page pypdf complained about and got no text from is one it could not read, not one without
text: a PDF of only such pages is "complex", not a scan without a text layer."""

from __future__ import annotations

import io
import json
import logging
import sys
import time
import warnings


def limit(memory: int, cpu: int) -> None:
    """The child's own bounds, where the OS has them. Linux: its address space (RLIMIT_AS:
    an allocation past it is a MemoryError, reported as "memory") and its CPU time
    (RLIMIT_CPU: SIGXCPU ends a child the parent can no longer kill, as when the parent
    itself was killed). Elsewhere (macOS does not enforce RLIMIT_AS; Windows has no
    `resource`) only the parent's wall-clock bound applies."""
    if sys.platform != "linux":
        return
    import resource

    for which, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu)):
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, hard))


class Complaints(logging.Handler):
    """Counts what pypdf logs (it logs, and goes on, where it cannot parse an object)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def read(data: bytes, seconds: float) -> tuple[str, int, list[str]]:
    """Status, page count and the text of each page read (see the module's docstring)."""
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError

    complaints = Complaints()
    logger = logging.getLogger("pypdf")
    logger.addHandler(complaints)
    logger.propagate = False
    deadline = time.monotonic() + seconds
    pages = unreadable = 0
    texts: list[str] = []
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return "encrypted", 0, []
        pages = len(reader.pages)  # the page tree parsed: what it logs counts for page 1
        before = 0
        for page in reader.pages:
            if texts and time.monotonic() > deadline:
                break
            texts.append((page.extract_text() or "").strip())
            unreadable += not texts[-1] and complaints.count > before
            before = complaints.count
    except MemoryError:
        return "memory", pages, []
    except (RecursionError, LimitReachedError):
        return "complex", pages, []
    except Exception:
        # pypdf raises its own errors, but on a damaged file also ValueError, KeyError,
        # TypeError, ... from deep inside: any of them means "cannot be read".
        return "broken", pages, []
    if unreadable and not any(texts):
        return "complex", pages, []
    return ("ok" if texts else "broken"), pages, texts


def main() -> None:
    seconds, memory, cpu = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    limit(memory, cpu)
    warnings.simplefilter("ignore")
    status, pages, texts = read(sys.stdin.buffer.read(), seconds)
    head = json.dumps({"status": status, "pages": pages, "read": len(texts)})
    text = "\n\n".join(t for t in texts if t)
    sys.stdout.buffer.write(head.encode() + b"\n" + text.encode("utf-8", "replace"))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
