"""The wiring's media part: what the turn understands uploads with, built from the settings
and closed with the core (wiring/core.py's `Core` holds one `MediaParts`).

One client of the provider's endpoints beside chat serves the transcriber and the model
catalog; PDFs are read in child processes bounded in time and memory (media/pdf.py), which
shutdown kills if any is still reading; images are decoded a few at a time, each bounded in
pixels (media/images.py), with glibc told to hand their memory back when freed
(media/memory.py). Building connects nowhere and starts nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from membot.clock import Clock, utc_now
from membot.config import LlmSettings, MediaSettings
from membot.core.media import MediaReader
from membot.media.images import ImageDecoder
from membot.media.memory import map_large_blocks
from membot.media.pdf import PdfProcesses
from membot.usage import UsageLedger
from membot.wiring.model import LLM_RETRIES

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from membot.media.catalog import ModelCatalog


@dataclass
class MediaParts:
    """The reader the turn uses and what it holds that must be started and closed: which
    models see images and their prices (fetched at start and daily), the client it and the
    transcriber share, the PDF reading children."""

    reader: MediaReader
    catalog: ModelCatalog
    provider: AsyncOpenAI
    pdf: PdfProcesses

    async def start(self) -> None:
        """The process is up: fetch the model list now, then daily."""
        await self.catalog.start()

    async def aclose(self) -> None:
        await self.pdf.aclose()  # first: a child still reading is killed, not waited for
        await self.catalog.close()
        await self.provider.close()


def build_media(
    llm: LlmSettings, media: MediaSettings, ledger: UsageLedger | None, clock: Clock = utc_now
) -> MediaParts:
    from membot.media.catalog import ModelCatalog  # imported late: only where used
    from membot.media.provider import provider_client
    from membot.media.transcribe import Transcriber

    client = provider_client(llm, retries=LLM_RETRIES if llm.enable_retry else 0)
    catalog = ModelCatalog(client)
    pdf = PdfProcesses(
        seconds=media.pdf_timeout, memory_mb=media.pdf_memory_mb, processes=media.pdf_processes
    )
    map_large_blocks()
    images = ImageDecoder(max_pixels=media.max_pixels, decodes=media.image_decodes)
    reader = MediaReader(
        transcriber=Transcriber(client, media.transcription_model),
        catalog=catalog,
        ledger=ledger,
        default_model=llm.default_model,
        models=llm.model_choices,
        max_audio_seconds=media.max_audio_seconds,
        max_images_in_prompt=media.max_images_in_prompt,
        document_prompt_chars=media.document_prompt_chars,
        clock=clock,
        pdf=pdf,
        images=images,
    )
    return MediaParts(reader, catalog, client, pdf)
