"""The process that reads one PDF's text layer (membot.media.pdf starts it, one per PDF).

    python -I .../membot/media/pdf_child.py <page seconds> <memory bytes> <cpu seconds>

stdin: the PDF's bytes. stdout: one line of JSON, ``{"status": ..., "pages": N, "read": n}``,
then the text of the pages read, UTF-8, pages apart by a blank line. Status is "ok",
"encrypted" (a password is needed), "broken" (pypdf cannot parse it) or "memory" (over the
memory bound). Pages are read one after another until ``page seconds`` have passed (at least
one is); the parent kills this process if it is still running at its own, later bound.

It imports the standard library and pypdf only, and is started with an empty environment
and `-I` (no PYTHON* variables, no user site): it knows the bytes and its limits, nothing of
the bot's settings or tokens. pypdf's warnings (logging and `warnings`) are dropped: a
crafted file can make millions, and stderr is left for a crash's traceback."""

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


def read(data: bytes, seconds: float) -> tuple[str, int, list[str]]:
    """Status, page count and the text of each page read (see the module's docstring)."""
    from pypdf import PdfReader

    deadline = time.monotonic() + seconds
    pages = 0
    texts: list[str] = []
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return "encrypted", 0, []
        pages = len(reader.pages)
        for page in reader.pages:
            if texts and time.monotonic() > deadline:
                break
            texts.append((page.extract_text() or "").strip())
    except MemoryError:
        return "memory", pages, []
    except Exception:
        # pypdf raises its own errors, but on a damaged file also ValueError, KeyError,
        # TypeError, ... from deep inside: any of them means "cannot be read".
        return "broken", pages, []
    return ("ok" if texts else "broken"), pages, texts


def main() -> None:
    seconds, memory, cpu = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    limit(memory, cpu)
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    status, pages, texts = read(sys.stdin.buffer.read(), seconds)
    head = json.dumps({"status": status, "pages": pages, "read": len(texts)})
    text = "\n\n".join(t for t in texts if t)
    sys.stdout.buffer.write(head.encode() + b"\n" + text.encode("utf-8", "replace"))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
