"""What a message carried besides its text, as the archive keeps it, and the names of a
conversation's files.

An `Attachment` is metadata only: a kind, sizes and durations, and the key of the
conversation file holding what must be read back (an image's bytes, a document's text).
The archive line keeps it as JSON beside the message's text, never the bytes themselves:
messages.txt stays text, whatever was sent. A voice message keeps no file: its transcript
is the message's text.

File keys are made here (`new_file_key`) and checked here (`check_file_key`) before any
backend turns one into a path or a Redis field: a key never comes from user input.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any, Final, Literal

from membot.errors import MembotError
from membot.memory.contract.state import opt_int, opt_str

AttachmentKind = Literal["voice", "audio", "video_note", "image", "document"]
ATTACHMENT_KINDS: Final = frozenset({"voice", "audio", "video_note", "image", "document"})

#: 32 hex digits and a short lowercase extension: nothing a path could be bent with.
_FILE_KEY = re.compile(r"[0-9a-f]{32}\.[a-z0-9]{1,8}")


class InvalidFileKey(MembotError, ValueError):
    """A file key not made by `new_file_key`: refused before it reaches any storage."""


def new_file_key(extension: str) -> str:
    """A fresh key for a conversation file, e.g. ``new_file_key("jpg")``."""
    return check_file_key(f"{uuid.uuid4().hex}.{extension.lower().lstrip('.')}")


def check_file_key(key: str) -> str:
    """``key`` when it is a valid file key; InvalidFileKey otherwise."""
    if not isinstance(key, str) or _FILE_KEY.fullmatch(key) is None:
        raise InvalidFileKey("invalid file key")
    return key


@dataclass(frozen=True, slots=True)
class Attachment:
    """One thing a message carried. ``file`` is the conversation file's key (an image's
    bytes, a document's extracted text as UTF-8), None when nothing is kept (voice).
    ``size`` is the bytes received; ``seconds`` an audio's length; ``pages`` a PDF's;
    ``chars`` a document's extracted text length; ``width``/``height`` an image's as sent
    to the model."""

    kind: AttachmentKind
    file: str | None = None
    mime: str | None = None
    name: str | None = None
    size: int = 0
    seconds: float | None = None
    pages: int | None = None
    chars: int | None = None
    width: int | None = None
    height: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind}
        for key in ("file", "mime", "name", "seconds", "pages", "chars", "width", "height"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        data["size"] = self.size
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attachment:
        """Raises ValueError / KeyError / TypeError on a record that is not one."""
        kind = data["kind"]
        if kind not in ATTACHMENT_KINDS:
            raise ValueError("unknown attachment kind")
        file = data.get("file")
        return cls(
            kind=kind,
            file=check_file_key(file) if file is not None else None,
            mime=opt_str(data.get("mime")),
            name=opt_str(data.get("name")),
            size=int(data.get("size", 0)),
            seconds=float(data["seconds"]) if data.get("seconds") is not None else None,
            pages=opt_int(data.get("pages")),
            chars=opt_int(data.get("chars")),
            width=opt_int(data.get("width")),
            height=opt_int(data.get("height")),
        )

    def marker(self) -> str:
        """The attachment as the model reads it in text: what it was, never its contents."""
        if self.kind in ("voice", "audio", "video_note"):
            what = {"voice": "voice message", "audio": "audio", "video_note": "video note"}
            length = f", {self.seconds:.0f} s" if self.seconds is not None else ""
            return f"[{what[self.kind]}{length}; its transcript follows]"
        if self.kind == "image":
            name = f" {self.name}" if self.name else ""
            return f"[image{name}]"
        details = [f"{self.pages} page{'s' if self.pages != 1 else ''}"] if self.pages else []
        if self.chars is not None:
            details.append(f"{self.chars} characters")
        name = f" {self.name}" if self.name else ""
        extra = f" ({', '.join(details)})" if details else ""
        return f"[document{name}{extra}; its text is kept and searchable with search_history]"
