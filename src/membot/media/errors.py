"""What can be wrong with a file a user sent. Each is a short, clear reply, never a crash.

    MediaError              the file cannot be used; nothing of it was stored
    ├── FileTooBig          over Telegram's 20 MB download limit (or the API's own)
    ├── UnsupportedType     a kind of file membot does not read
    ├── BrokenFile          damaged, encrypted or not what its type says
    │   ├── NotThatKind     readable, but not what it was sent as (a PDF as an image, a
    │   │                   JPEG as audio, binary bytes as a text file)
    │   └── TooComplex      a PDF nested too deeply, or over the time or memory bound
    ├── ImageTooLarge       an image of more pixels than MEDIA_MAX_PIXELS, not reducible
    ├── NoTextLayer         a PDF of scanned pages: no text to read
    ├── NoAudio             a video (note) without a sound track
    └── AudioTooLong        longer than MAX_AUDIO_SECONDS

A failed transcription is a model call that failed: an `LLMError` (llm/errors.py).

`str()` of each names kinds, sizes and durations only, never the file's name or contents:
all are safe to log. What the front door tells the user is chosen by class. Which of the
message's files it was (`position`, from 1, and `file_name`) is set by whoever knew, for the
reply only (a name may say what the file holds: never logged).
"""

from __future__ import annotations

from membot.errors import MembotError

#: Telegram's limit on files a bot may download (getFile), in bytes.
TELEGRAM_DOWNLOAD_LIMIT = 20 * 1024 * 1024


class MediaError(MembotError):
    """Base class: the file cannot be used; the user is told why, the bot keeps going."""

    position: int | None = None
    file_name: str | None = None

    def about(self, position: int | None, file_name: str | None) -> MediaError:
        """This error, saying which file it is about (kept when already set)."""
        if self.position is None and self.file_name is None:
            self.position, self.file_name = position, file_name
        return self


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


class NotThatKind(BrokenFile):
    """A file that is not what it was sent as (``kind``: "image", "audio", "text")."""

    def __init__(self, kind: str) -> None:
        MediaError.__init__(self, f"not {kind}: the file is something else")
        self.kind = kind


class TooComplex(BrokenFile):
    """A PDF that cannot be read as it is built: nested too deeply for the reader, or over
    the time or memory a PDF may take."""

    def __init__(self, reason: str) -> None:
        MediaError.__init__(self, f"PDF too complex to read: {reason}")
        self.kind = "pdf"
        self.reason = reason


class ImageTooLarge(MediaError):
    """An image of more pixels than may be decoded whole (``limit``), in a format that
    cannot be decoded at a reduced size."""

    def __init__(self, width: int, height: int, limit: int) -> None:
        super().__init__(f"image of {width}x{height} pixels is over the limit of {limit}")
        self.width, self.height, self.limit = width, height, limit


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
