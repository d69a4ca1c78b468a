"""An MCP tool's result as the model gets it (membot/mcp/results.py)."""

from __future__ import annotations

import base64

import pytest
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from membot.llm.tools import ToolError, ToolImage
from membot.mcp.results import MAX_IMAGES, to_output
from tests.fakes.mcp_servers import PNG

PNG64 = base64.b64encode(PNG).decode()


def test_text_and_images_in_their_order() -> None:
    result = CallToolResult(
        content=[
            TextContent(text="Here is the chart:"),
            ImageContent(data=PNG64, mime_type="image/png"),
            TextContent(text="and its caption."),
        ]
    )
    output = to_output(result)
    assert output.text == (
        f"Here is the chart:\n[image 1: image/png, {len(PNG)} bytes]\nand its caption."
    )
    assert output.images == (ToolImage(PNG, "image/png"),)


def test_what_cannot_be_shown_is_named() -> None:
    result = CallToolResult(
        content=[
            ImageContent(data="not base64!", mime_type="image/png"),
            ImageContent(data=PNG64, mime_type="image/tiff"),
            AudioContent(data="AAAA", mime_type="audio/wav"),
            ResourceLink(name="report", uri="file:///srv/report.pdf"),
            EmbeddedResource(resource=TextResourceContents(uri="file:///a.txt", text="inline")),
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri="file:///b.bin", blob="AAAA", mime_type="application/zip"
                )
            ),
        ]
    )
    output = to_output(result)
    assert output.images == ()
    assert output.text.splitlines() == [
        "[an image (image/png) that cannot be shown]",
        "[an image (image/tiff) that cannot be shown]",
        "[audio (audio/wav), not shown]",
        "[resource report: file:///srv/report.pdf]",
        "inline",
        "[resource file:///b.bin (application/zip), not shown]",
    ]


def test_at_most_a_few_images_of_one_result_are_shown() -> None:
    many = [ImageContent(data=PNG64, mime_type="image/png") for _ in range(MAX_IMAGES + 2)]
    output = to_output(CallToolResult(content=list(many)))
    assert len(output.images) == MAX_IMAGES
    assert output.text.count("cannot be shown") == 2


def test_structured_content_alone_is_given_as_json() -> None:
    output = to_output(CallToolResult(content=[], structured_content={"temp": 21.5, "unit": "C"}))
    assert output.text == '{"temp": 21.5, "unit": "C"}'


def test_a_result_marked_as_an_error_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="the disk is full"):
        to_output(CallToolResult(content=[TextContent(text="the disk is full")], is_error=True))
    with pytest.raises(ToolError, match="said nothing"):
        to_output(CallToolResult(content=[], is_error=True))
