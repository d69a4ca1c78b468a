"""Telegram's formatting, as the fake Bot API checks it: the three parse modes (HTML,
MarkdownV2, legacy Markdown, each modelled on TDLib's parser) and explicit entities."""

from collections.abc import Callable
from typing import Any

from tests.fakes.telegram.markup.entities import validate_entities
from tests.fakes.telegram.markup.html import parse_html
from tests.fakes.telegram.markup.markdown import parse_markdown
from tests.fakes.telegram.markup.markdown_v2 import parse_markdown_v2
from tests.fakes.telegram.markup.text import ENTITY_TYPES, ParseError, utf16_len

PARSERS: dict[str, Callable[[str], tuple[str, list[dict[str, Any]]]]] = {
    "html": parse_html,
    "markdownv2": parse_markdown_v2,
    "markdown": parse_markdown,
}

__all__ = [
    "ENTITY_TYPES",
    "PARSERS",
    "ParseError",
    "parse_html",
    "parse_markdown",
    "parse_markdown_v2",
    "utf16_len",
    "validate_entities",
]
