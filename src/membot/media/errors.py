"""What can be wrong with a file a user sent. Each is a short, clear reply, never a crash.

    MediaError              the file cannot be used; nothing of it was stored
    ├── FileTooBig          over Telegram's 20 MB download limit (or the API's own)
    ├── UnsupportedType     a kind of file membot does not read
    ├── BrokenFile          damaged, encrypted or not what its type says
    ├── NoTextLayer         a PDF of scanned pages: no text to read
    ├── NoAudio             a video (note) without a sound track
    └── AudioTooLong        longer than MAX_AUDIO_SECONDS

A failed transcription is a model call that failed: an `LLMError` (llm/errors.py).

`str()` of each names kinds, sizes and durations only, never the file's name or contents:
all are safe to log. What the front door tells the user is chosen by class.
"""

from __future__ import annotations

from membot.errors import MembotError

#: Telegram's limit on files a bot may download (getFile), in bytes.
TELEGRAM_DOWNLOAD_LIMIT = 20 * 1024 * 1024


class MediaError(MembotError):
    """Base class: the file cannot be used; the user is told why, the bot keeps going."""


class FileTooBig(MediaError):
    def __init__(self, size: int, limit: int = TELEGRAM_DOWNLOAD_LIMIT) -> None:
        super().__init__(f"file of {size} bytes is over the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class UnsupportedType(MediaError):
    """``mime_type`` is the declared MIME type (Telegram's or the client's), if any."""

    def __init__(self, mime_type: str | None) -> None:
        super().__init__(f"unsupported file type {mime_type or 'unknown'}")
        self.mime_type = mime_type


class BrokenFile(MediaError):
    """``kind`` is what the file claimed to be: "pdf", "text", "image", "audio", "video"."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"broken {kind} file")
        self.kind = kind


class NoTextLayer(MediaError):
    def __init__(self, pages: int) -> None:
        super().__init__(f"PDF of {pages} page(s) without a text layer")
        self.pages = pages


class NoAudio(MediaError):
    def __init__(self) -> None:
        super().__init__("no audio track")


class AudioTooLong(MediaError):
    def __init__(self, seconds: float, limit: float) -> None:
        super().__init__(f"audio of {seconds:.1f} s is over the limit of {limit:g} s")
        self.seconds = seconds
        self.limit = limit
