"""What an MCP tool's result becomes for the model: its text, and its images (for a model
that sees them: the turn decides, core/steps.py); anything else is named in a line. A result
marked `isError` is a ToolError: the model reads it as any tool's error. The executor cuts
the text at its limit like any tool's result (llm/tools/executor.py)."""

from __future__ import annotations

import base64
import binascii
import json

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from membot.llm.tools import ToolError, ToolImage, ToolOutput

# Images of one result shown to the model; more are named only.
MAX_IMAGES = 4
# The most bytes an image may have (decoded): the image decoder bounds it again.
MAX_IMAGE_BYTES = 10 * 1024 * 1024
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})


def to_output(result: CallToolResult) -> ToolOutput:
    """The result as text and images; raises ToolError for a result marked as an error."""
    lines: list[str] = []
    images: list[ToolImage] = []
    for block in result.content:
        if isinstance(block, TextContent):
            lines.append(block.text)
        elif isinstance(block, ImageContent):
            image = _image(block, len(images))
            if image is None:
                lines.append(f"[an image ({block.mime_type}) that cannot be shown]")
            else:
                images.append(image)
                lines.append(f"[image {len(images)}: {block.mime_type}, {len(image.data)} bytes]")
        elif isinstance(block, AudioContent):
            lines.append(f"[audio ({block.mime_type}), not shown]")
        elif isinstance(block, ResourceLink):
            lines.append(f"[resource {block.name}: {block.uri}]")
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            if isinstance(resource, BlobResourceContents):
                kind = resource.mime_type or "binary data"
                lines.append(f"[resource {resource.uri} ({kind}), not shown]")
            else:
                lines.append(resource.text)
    if not lines and result.structured_content is not None:
        lines.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(lines)
    if result.is_error:
        raise ToolError(text or "the tool failed and said nothing about why")
    return ToolOutput(text=text, images=tuple(images))


def _image(block: ImageContent, shown: int) -> ToolImage | None:
    if shown >= MAX_IMAGES or block.mime_type not in _IMAGE_TYPES:
        return None
    if len(block.data) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        return None
    try:
        data = base64.b64decode(block.data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return ToolImage(data=data, mime=block.mime_type)
