"""What a turn makes of the files a user sent, before the model is called.

A front door hands the turn `Upload`s: bytes it has (downloaded from Telegram, decoded
from the API's base64), not yet understood. `MediaReader.understand` turns them into what
the model reads and what the memory keeps:

- voice, audio, video note: OGG/Opus (media.audio), then text (media.Transcriber); the
  transcript is the user's words, and the call is charged to the turn's user and chat in
  the usage ledger like a model call (budgets and /usage see it);
- photo, image document: scaled for a model (media.images), kept as a conversation file,
  shown as an `image_url` part with a data URL (never a URL of ours) — only to a model that
  sees images: otherwise the turn fails with ModelSeesNoImages, naming the models of
  MODELS that do (media.ModelCatalog);
- document: its text (media.documents), kept as a conversation file (search_history finds
  it, in chunks), given to the model for this turn up to DOCUMENT_PROMPT_CHARS.

Nothing is stored here: the agent puts the files right before it appends the turn, so a
failure anywhere leaves nothing behind. Logs carry kinds, sizes and durations only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from membot.clock import Clock, utc_now
from membot.llm.model import Usage
from membot.media.documents import is_image, read_document
from membot.media.errors import MediaError, UnsupportedType
from membot.memory.contract.attachment import Attachment, new_file_key
from membot.memory.contract.models import Message
from membot.memory.contract.repository import ChatRepository, StorageUnavailable
from membot.usage.ledger import UsageLedger
from membot.usage.metered import ChargeWriter

if TYPE_CHECKING:
    from membot.ids import ConversationId
    from membot.media.catalog import ModelCatalog
    from membot.media.images import ImageDecoder
    from membot.media.pdf import PdfProcesses
    from membot.media.transcribe import Transcriber

log = logging.getLogger(__name__)

UploadKind = Literal["voice", "audio", "video_note", "photo", "document"]
_AUDIO_KINDS = frozenset({"voice", "audio", "video_note"})
_EXTENSIONS = {"image/jpeg": "jpg", "image/png": "png", "image/webp": "webp"}
_CATALOG_RETRY = 60.0  # s between fetches of a never-fetched catalog, when an image arrives


@dataclass(frozen=True, slots=True)
class Upload:
    """Bytes a front door has, not yet understood. ``caption``: Telegram's (the API's
    message text is the Incoming's text)."""

    kind: UploadKind
    data: bytes
    mime: str | None = None
    name: str | None = None
    caption: str = ""


class ModelSeesNoImages(MediaError):
    """The turn's model takes text only, and the user sent an image: nothing was sent or
    stored. ``vision_models`` are those of MODELS that see images (for "/model ...")."""

    def __init__(self, model: str, vision_models: tuple[str, ...]) -> None:
        super().__init__(
            f"model {model} takes text only; {len(vision_models)} of MODELS see images"
        )
        self.model = model
        self.vision_models = vision_models


@dataclass(frozen=True, slots=True)
class Understood:
    """A turn's uploads, understood. ``text`` is the user message's content (its text,
    captions and transcripts); ``files`` what to put before the turn is appended;
    ``images`` the image parts for this turn's prompt; ``documents`` the documents' text
    for it (cut); ``heard`` the transcripts, for the front door to quote."""

    text: str
    attachments: tuple[Attachment, ...] = ()
    files: tuple[tuple[str, bytes], ...] = ()
    images: tuple[dict[str, Any], ...] = ()
    documents: tuple[str, ...] = ()
    heard: str | None = None


class MediaReader:
    """Understands uploads for the agent (see the module's docstring)."""

    def __init__(
        self,
        *,
        transcriber: Transcriber | None,
        catalog: ModelCatalog | None,
        ledger: UsageLedger | None,
        default_model: str,
        models: Sequence[str] = (),
        max_audio_seconds: float = 600,
        max_images_in_prompt: int = 4,
        document_prompt_chars: int = 20_000,
        clock: Clock = utc_now,
        pdf: PdfProcesses | None = None,  # None: one child per PDF, default bounds
        images: ImageDecoder | None = None,  # None: one decode at a time, default bounds
    ) -> None:
        self.transcriber = transcriber
        self.catalog = catalog
        self.ledger = ledger
        self.default_model = default_model
        self.models = tuple(models) or (default_model,)
        self.max_audio_seconds = max_audio_seconds
        self.max_images = max_images_in_prompt
        self.document_chars = document_prompt_chars
        self.clock, self._catalog_tried, self.pdf = clock, float("-inf"), pdf
        if images is None:
            from membot.media.images import ImageDecoder

            images = ImageDecoder(decodes=1)
        self.images = images
        # The call was made and paid: a ledger that fails is never the turn's failure.
        self._charges = ChargeWriter(ledger, clock, "a transcription") if ledger else None

    # -- which models see images ------------------------------------------------------------

    async def sees_images(self, model: str | None) -> bool:
        """Whether the turn's model takes images (text only while the list is unknown)."""
        catalog = self.catalog
        if catalog is None:
            return False
        now = time.monotonic()
        if not catalog.fetched and now - self._catalog_tried >= _CATALOG_RETRY:
            # The start-up fetch failed (or never ran): an image is worth one more try.
            self._catalog_tried = now
            await catalog.refresh()
        return catalog.sees_images(model or self.default_model)

    def vision_models(self) -> tuple[str, ...]:
        return self.catalog.vision_models(self.models) if self.catalog else ()

    # -- understanding -----------------------------------------------------------------------

    async def understand(
        self,
        text: str,
        uploads: Sequence[Upload],
        *,
        model: str | None,
        language: str | None = None,
    ) -> Understood:
        """The uploads, understood. Raises ModelSeesNoImages, a MediaError (the file, saying
        which: its position and name) or an LLMError (the transcription); nothing is stored
        either way."""
        from membot.media.audio import prepare_audio
        from membot.media.images import image_part
        from membot.media.text import cut_for_prompt

        if any(_is_image(u) for u in uploads) and not await self.sees_images(model):
            raise ModelSeesNoImages(model or self.default_model, self.vision_models())
        words = [text.strip()]
        attachments: list[Attachment] = []
        files: list[tuple[str, bytes]] = []
        images: list[dict[str, Any]] = []
        documents: list[str] = []
        heard: list[str] = []
        for position, upload in enumerate(uploads, 1):
            try:
                started = time.perf_counter()
                if upload.caption.strip() and upload.caption.strip() not in words:
                    words.append(upload.caption.strip())
                if _is_image(upload):
                    image = await self.images.prepare(upload.data)
                    key = new_file_key(_EXTENSIONS.get(image.mime_type, "jpg"))
                    files.append((key, image.data))
                    images.append(image_part(image))
                    attachments.append(
                        Attachment(
                            kind="image",
                            file=key,
                            mime=image.mime_type,
                            name=upload.name,
                            size=len(upload.data),
                            width=image.width,
                            height=image.height,
                        )
                    )
                elif upload.kind in _AUDIO_KINDS:
                    clip = await prepare_audio(upload.data, max_seconds=self.max_audio_seconds)
                    if self.transcriber is None:
                        raise UnsupportedType(upload.mime)
                    transcript = await self.transcriber.transcribe(clip, language=language)
                    await self._charge(transcript.model, transcript.usage)
                    heard.append(transcript.text)
                    words.append(transcript.text)
                    attachments.append(
                        Attachment(
                            kind=upload.kind,  # type: ignore[arg-type]
                            mime=upload.mime,
                            size=len(upload.data),
                            seconds=round(transcript.seconds, 1),
                        )
                    )
                else:
                    document = await read_document(
                        upload.data, mime_type=upload.mime, file_name=upload.name, pdf=self.pdf
                    )
                    key = new_file_key("txt")
                    files.append((key, document.text.encode("utf-8")))
                    shown, _ = cut_for_prompt(document.text, self.document_chars)
                    label = f"document {upload.name}" if upload.name else "document"
                    documents.append(f"[The text of the {label}:]\n{shown}")
                    attachments.append(
                        Attachment(
                            kind="document",
                            file=key,
                            mime=upload.mime,
                            name=upload.name,
                            size=len(upload.data),
                            pages=document.pages,
                            chars=len(document.text),
                        )
                    )
                log.info(
                    "media: kind=%s size=%d took=%.3fs",
                    upload.kind,
                    len(upload.data),
                    time.perf_counter() - started,
                )
            except MediaError as exc:
                exc.about(position, upload.name)
                raise
        return Understood(
            text="\n\n".join(w for w in words if w),
            attachments=tuple(attachments),
            files=tuple(files),
            images=tuple(images),
            documents=tuple(documents),
            heard="\n\n".join(heard) if heard else None,
        )

    async def _charge(self, model: str, usage: Usage) -> None:
        """The transcription, charged to the turn's user and chat like a model call."""
        if self._charges is not None:
            await self._charges.write("transcription", model, usage)

    # -- the window's images -----------------------------------------------------------------

    async def window_images(
        self,
        repository: ChatRepository,
        cid: ConversationId,
        history: Sequence[Message],
        *,
        model: str | None,
        taken: int = 0,
    ) -> Mapping[int, tuple[dict[str, Any], ...]]:
        """The image parts of the window's latest images (by seq), up to
        MAX_IMAGES_IN_PROMPT less the `taken` by this turn; none for a model that takes
        text only. An image that cannot be read back stays a text marker."""
        from membot.media.images import PreparedImage, image_part

        wanted: list[tuple[int, Attachment]] = []
        budget = self.max_images - taken
        for message in reversed(history):
            for attachment in reversed(message.attachments):
                if budget > 0 and attachment.kind == "image" and attachment.file:
                    wanted.append((message.seq, attachment))
                    budget -= 1
        if not wanted or not await self.sees_images(model):
            return {}
        out: dict[int, list[dict[str, Any]]] = {}
        for seq, attachment in reversed(wanted):
            try:
                data = await repository.get_file(cid, attachment.file or "")
            except StorageUnavailable:
                data = None
            if data is None:
                continue
            image = PreparedImage(data, attachment.mime or "image/jpeg", 0, 0)
            out.setdefault(seq, []).append(image_part(image))
        return {seq: tuple(parts) for seq, parts in out.items()}


def _is_image(upload: Upload) -> bool:
    return upload.kind == "photo" or (
        upload.kind == "document" and is_image(upload.mime, upload.name)
    )
