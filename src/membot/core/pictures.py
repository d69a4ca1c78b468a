"""Images a tool returned (an MCP server's, membot.mcp), for the turn's next model call.

A model that sees images gets them as image parts, in a user message after the tool
results (a tool message holds text only in the Chat Completions format); the tool's result
says which images it had. They are shown in the turn they came in, not stored: the archive
keeps the result's text. Each is decoded and scaled like an image a user sends
(media/images.py); one that does not decode is left out."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from membot.llm.model import ChatMessage
from membot.llm.tools import ToolImage
from membot.media.errors import MediaError

if TYPE_CHECKING:
    from membot.core.media import MediaReader

log = logging.getLogger(__name__)

NOTE = "[The images the tool results above name, in their order:]"


class ToolPictures:
    """Tool images as a user message of image parts, for a model that sees images."""

    def __init__(self, media: MediaReader) -> None:
        self.media = media

    async def message(self, images: Sequence[ToolImage], model: str) -> ChatMessage | None:
        """The message showing `images` to `model`; None for a model that takes text only
        (the results' text already names them) or when none decodes."""
        from membot.media.images import image_part

        if not images or not await self.media.sees_images(model):
            return None
        parts: list[dict[str, Any]] = [{"type": "text", "text": NOTE}]
        for image in images[: max(self.media.max_images, 1)]:
            try:
                prepared = await self.media.images.prepare(image.data)
            except MediaError as exc:
                log.warning("a tool's image left out: %s", type(exc).__name__)
                continue
            parts.append(image_part(prepared))
        return {"role": "user", "content": parts} if len(parts) > 1 else None
