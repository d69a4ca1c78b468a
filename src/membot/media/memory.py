"""Large blocks of memory handed back to the operating system as soon as they are freed.

glibc's malloc serves a request of 128 KB or more with a mapping of its own, unmapped when
freed, but raises that threshold to the size of each such block freed (up to 32 MB): after
the first decoded image, Pillow's 16 MB blocks of pixels come from malloc's heaps instead
(one per worker thread), and stay in the process when freed. Decoding four 60-megapixel
PNGs left a process at 1 GB. A fixed threshold keeps every block of ``threshold`` bytes or
more a mapping of its own: freed, it is gone. Measured on four 25-megapixel PNGs, two
decoded at a time: without it the process kept 280 MB afterwards and peaked 270-400 MB
above where it started; with it, it kept 4 MB and peaked 270 MB (`malloc_trim` after each
decode kept 140 MB and peaked as high as without). Elsewhere than glibc this does nothing."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger(__name__)

#: mallopt's parameter number for the mmap threshold (malloc.h).
_M_MMAP_THRESHOLD = -3
#: Blocks of this size and larger are mappings of their own (an image's pixels are).
LARGE_BLOCK = 4 * 1024 * 1024


def map_large_blocks(threshold: int = LARGE_BLOCK) -> bool:
    """Make glibc map every allocation of ``threshold`` bytes or more by itself, for the
    whole process. True if it did; False where there is no glibc (musl, macOS, Windows)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        done = bool(libc.mallopt(_M_MMAP_THRESHOLD, threshold))
    except (OSError, AttributeError):
        done = False
    if not done:
        log.debug("mallopt is not available: freed image memory may stay with the process")
    return done
