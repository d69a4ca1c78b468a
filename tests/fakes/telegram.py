"""A fake Telegram Bot API server: a real aiohttp HTTP server on 127.0.0.1.

The bot under test reaches it only through configuration (``TELEGRAM_API_BASE`` =
:attr:`FakeTelegram.base_url`), so every request goes through aiogram's real HTTP session,
serialisation and error mapping. The fake validates requests the way Telegram does where
mistakes are easy to make (text length in UTF-16 units, HTML / MarkdownV2 markup, entity
offsets) and records everything the bot did so tests can assert on it.

Synchronisation is event driven: every state change wakes the waiters, nothing polls or sleeps.
"""

from __future__ import annotations

import asyncio
import bisect
import html
import itertools
import json
import logging
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from aiohttp import web

from tests.fakes.server import LocalServer
from tests.fakes.telegram_files import FileError, FileStore
from tests.fakes.telegram_webhook import Delivery, WebhookSender

log = logging.getLogger(__name__)

BOT_ID = 4242
BOT_USERNAME = "membot_test_bot"
BOT_FIRST_NAME = "membot"
MAX_MESSAGE_LENGTH = 4096  # UTF-16 code units, counted after markup is parsed
# Group messages need a sender; a stable id makes "same person in two groups" tests easy.
DEFAULT_GROUP_USER_ID = 1001
# Supergroup ids look like -100xxxxxxxxxx; plain groups are small negative numbers.
_SUPERGROUP_ID_LIMIT = -1_000_000_000_000

ENTITY_TYPES = frozenset(
    {
        "bold",
        "italic",
        "underline",
        "strikethrough",
        "spoiler",
        "code",
        "pre",
        "text_link",
        "blockquote",
        "expandable_blockquote",
        "url",
        "mention",
        "hashtag",
        "cashtag",
        "bot_command",
        "email",
        "phone_number",
        "text_mention",
        "custom_emoji",
        "date_time",
    }
)
CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)
# Form-encoded requests (aiogram's default) carry complex values as JSON strings. Only these
# fields are decoded: a message text that happens to start with "[" must stay a string.
_JSON_FIELDS = frozenset(
    {
        "allowed_updates",
        "caption_entities",
        "commands",
        "entities",
        "link_preview_options",
        "reply_markup",
        "reply_parameters",
        "scope",
    }
)
_CONFLICT = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)
_WEBHOOK_ACTIVE = (
    "Conflict: can't use getUpdates method while webhook is active; "
    "use deleteWebhook to delete the webhook first"
)
# Methods that count against Telegram's flood control (see FakeTelegram.flood_control).
_PACED = frozenset({"sendmessage", "editmessagetext", "sendphoto", "senddocument"})
_COMMAND_RE = re.compile(r"[a-z0-9_]{1,32}")


# --------------------------------------------------------------------------------------------
# Public records
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class SentMessage:
    """One successful ``sendMessage``.

    ``text`` and ``entities`` are what the user sees: when ``parse_mode`` was used they are the
    result of parsing the markup (exactly what Telegram stores); ``raw_text`` is the text as
    the bot sent it.
    """

    chat_id: int
    text: str
    entities: list[dict[str, Any]]
    parse_mode: str | None
    reply_to_message_id: int | None
    message_id: int
    raw_text: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    at: float = 0.0  # time.monotonic() when the fake accepted it


@dataclass(slots=True)
class Draft:
    """One accepted ``sendMessageDraft``: the partial answer a private chat was shown."""

    chat_id: int
    draft_id: int
    text: str
    entities: list[dict[str, Any]]
    can_stop: bool
    at: float  # time.monotonic() when the fake accepted it


class MessageOptions(TypedDict, total=False):
    """Keyword options shared by the ``push_*`` update builders."""

    user_id: int
    first_name: str
    last_name: str | None
    username: str | None
    language_code: str | None
    chat_type: str | None
    title: str | None
    reply_to_bot: bool
    reply_to: int | None
    thread_id: int | None  # a forum topic of a supergroup


# --------------------------------------------------------------------------------------------
# Internals: errors, notification, text helpers
# --------------------------------------------------------------------------------------------


class _ApiError(Exception):
    """Raised by method handlers; rendered as Telegram's ``{"ok": false, ...}`` response."""

    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after


class _ParseError(Exception):
    """Markup/entity problem; the message is what follows "can't parse entities: "."""


def _bad_entities(reason: str) -> _ApiError:
    return _ApiError(400, f"Bad Request: can't parse entities: {reason}")


class _Notifier:
    """Broadcasts "state changed" to any number of waiters, callable from synchronous code.

    ``asyncio.Condition.notify_all()`` requires holding the condition's lock, which can only be
    taken with ``await``; the ``push_*`` builders are synchronous. So each change sets the
    current Event and swaps in a fresh one; waiters re-check their predicate after every
    wake-up, with the same semantics as ``Condition.wait_for()``.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    @property
    def current(self) -> asyncio.Event:
        """Set at the next notify()."""
        return self._event

    async def wait_for(self, predicate: Callable[[], bool], timeout: float | None) -> bool:
        """Wait until ``predicate()`` is true; returns its final value if the timeout passes."""
        try:
            async with asyncio.timeout(timeout):
                while not predicate():
                    await self._event.wait()
        except TimeoutError:
            return predicate()
        return True


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of every Telegram offset and length limit."""
    return len(text.encode("utf-16-le")) // 2


def _u16(char: str) -> int:
    return 2 if ord(char) > 0xFFFF else 1


def _byte_offset(text: str, index: int) -> int:
    # Telegram's parse errors report UTF-8 byte offsets into the submitted text.
    return len(text[:index].encode("utf-8", errors="surrogatepass"))


def _sort_entities(entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Telegram returns entities ordered by offset, outer (longer) entity first.
    return sorted(entities, key=lambda e: (e["offset"], -e["length"]))


# --------------------------------------------------------------------------------------------
# Markup parsers (modelled on TDLib's parse_html / parse_markdown_v2 / parse_markdown)
# --------------------------------------------------------------------------------------------

_HTML_SIMPLE_TAGS = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
    "code": "code",
    "pre": "pre",
}
_HTML_TAGS = frozenset({*_HTML_SIMPLE_TAGS, "a", "blockquote", "tg-emoji", "tg-time"})
_HTML_TAG_NAME = re.compile(r"[A-Za-z0-9-]*")
_HTML_ATTR = re.compile(
    r"""\s*([A-Za-z0-9_-]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?""",
)
_HTML_ENTITY = re.compile(r"&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|(lt|gt|amp|quot));")
_HTML_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


@dataclass(slots=True)
class _OpenTag:
    name: str
    attrs: dict[str, str]
    offset: int
    language: str | None = None


def parse_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse Telegram HTML into (plain text, entities); raises _ParseError like Telegram.

    Stricter than Telegram in one place, on purpose: a bare ``&`` that does not start an HTML
    entity is rejected (Telegram's docs require escaping it, its parser happens to tolerate it),
    so the bot cannot rely on lenient behaviour.
    """
    out: list[str] = []
    offset = 0
    stack: list[_OpenTag] = []
    entities: list[dict[str, Any]] = []
    i = 0
    n = len(text)
    while i < n:
        char = text[i]
        if char == "&":
            match = _HTML_ENTITY.match(text, i)
            if match is None:
                raise _ParseError(
                    f"Character '&' at byte offset {_byte_offset(text, i)} must be escaped as "
                    "&amp; (it does not start an HTML entity)"
                )
            decoded = _decode_html_entity(match)
            out.append(decoded)
            offset += utf16_len(decoded)
            i = match.end()
            continue
        if char != "<":
            out.append(char)
            offset += _u16(char)
            i += 1
            continue
        byte_at = _byte_offset(text, i)
        if text.startswith("</", i):
            end = text.find(">", i)
            if end == -1:
                raise _ParseError(f"Unclosed end tag at byte offset {byte_at}")
            name = text[i + 2 : end].strip().lower()
            if not stack:
                raise _ParseError(f"Unexpected end tag at byte offset {byte_at}")
            tag = stack.pop()
            if name != tag.name:
                raise _ParseError(
                    f'Unmatched end tag at byte offset {byte_at}, expected "</{tag.name}>", '
                    f'found "</{name}>"'
                )
            entity = _html_entity(tag, offset, stack)
            if entity is not None:
                entities.append(entity)
            i = end + 1
            continue
        name_match = _HTML_TAG_NAME.match(text, i + 1)
        name = name_match.group(0).lower() if name_match else ""
        if name not in _HTML_TAGS:
            raise _ParseError(f'Unsupported start tag "{name}" at byte offset {byte_at}')
        j = i + 1 + len(name)
        attrs: dict[str, str] = {}
        while True:
            while j < n and text[j].isspace():
                j += 1
            if j >= n:
                raise _ParseError(f"Unclosed start tag at byte offset {byte_at}")
            if text[j] == ">":
                break
            attr = _HTML_ATTR.match(text, j)
            if attr is None or attr.end() == j:
                raise _ParseError(
                    f'Empty attribute name in the tag "{name}" at byte offset {byte_at}'
                )
            value = next((g for g in attr.groups()[1:] if g is not None), "")
            attrs[attr.group(1).lower()] = html.unescape(value)
            j = attr.end()
        if name == "span" and attrs.get("class") != "tg-spoiler":
            raise _ParseError(f'Tag "span" must have class "tg-spoiler" at byte offset {byte_at}')
        if name == "tg-emoji" and not attrs.get("emoji-id"):
            raise _ParseError(f'Tag "tg-emoji" must have attribute "emoji-id" at byte {byte_at}')
        stack.append(_OpenTag(name, attrs, offset))
        i = j + 1
    if stack:
        raise _ParseError(f'Can\'t find end tag corresponding to start tag "{stack[-1].name}"')
    return "".join(out), _sort_entities(entities)


def _decode_html_entity(match: re.Match[str]) -> str:
    decimal, hexadecimal, named = match.groups()
    if named is not None:
        return _HTML_NAMED[named]
    code = int(decimal) if decimal is not None else int(hexadecimal, 16)
    if not 0 < code <= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise _ParseError(f"Invalid HTML entity {match.group(0)}")
    return chr(code)


def _html_entity(tag: _OpenTag, end: int, stack: list[_OpenTag]) -> dict[str, Any] | None:
    length = end - tag.offset
    if length <= 0:
        return None  # Telegram silently drops empty entities.
    base: dict[str, Any] = {"offset": tag.offset, "length": length}
    if tag.name == "code" and stack and stack[-1].name == "pre":
        # <pre><code class="language-x"> is one pre entity carrying the language.
        css = tag.attrs.get("class", "")
        if css.startswith("language-"):
            stack[-1].language = css.removeprefix("language-")
        return None
    if tag.name == "pre":
        return {"type": "pre", **base, **({"language": tag.language} if tag.language else {})}
    if tag.name in _HTML_SIMPLE_TAGS:
        return {"type": _HTML_SIMPLE_TAGS[tag.name], **base}
    if tag.name == "a":
        url = tag.attrs.get("href", "")
        return {"type": "text_link", **base, "url": url} if url else None
    if tag.name == "blockquote":
        kind = "expandable_blockquote" if "expandable" in tag.attrs else "blockquote"
        return {"type": kind, **base}
    if tag.name == "tg-emoji":
        return {"type": "custom_emoji", **base, "custom_emoji_id": tag.attrs["emoji-id"]}
    # tg-time
    try:
        unix_time = int(tag.attrs.get("unix", ""))
    except ValueError:
        raise _ParseError('Tag "tg-time" must have a numeric "unix" attribute') from None
    entity = {"type": "date_time", **base, "unix_time": unix_time}
    if "format" in tag.attrs:
        entity["date_time_format"] = tag.attrs["format"]
    return entity


_MDV2_RESERVED = frozenset("_*[]()~`>#+-=|{}.!")
_MDV2_NAMES = {
    "bold": "Bold",
    "italic": "Italic",
    "underline": "Underline",
    "strikethrough": "Strikethrough",
    "spoiler": "Spoiler",
    "code": "Code",
    "pre": "Pre",
    "text_link": "TextUrl",
    "custom_emoji": "CustomEmoji",
}


@dataclass(slots=True)
class _OpenMd:
    kind: str
    offset: int
    index: int
    language: str | None = None


def parse_markdown_v2(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse MarkdownV2 into (plain text, entities); raises _ParseError like Telegram.

    Follows TDLib's algorithm: any ASCII character may be escaped with a backslash; outside
    code/pre every character of ``_*[]()~`>#+-=|{}.!`` must be escaped unless it opens or
    closes an entity; ``>`` at the start of a line (and ``**>`` for expandable quotes) forms
    block quotations.
    """
    out: list[str] = []
    offset = 0
    stack: list[_OpenMd] = []
    entities: list[dict[str, Any]] = []
    quote: tuple[int, bool] | None = None  # (start offset, expandable)
    i = 0
    n = len(text)

    def reserved_error(index: int) -> _ParseError:
        return _ParseError(
            f"Character '{text[index]}' is reserved and must be escaped with the preceding '\\'"
        )

    def close_quote(end: int) -> None:
        nonlocal quote
        if quote is not None and end > quote[0]:
            kind = "expandable_blockquote" if quote[1] else "blockquote"
            entities.append({"type": kind, "offset": quote[0], "length": end - quote[0]})
        quote = None

    while i < n:
        char = text[i]
        in_code = bool(stack) and stack[-1].kind in ("code", "pre")
        if not in_code and (i == 0 or text[i - 1] == "\n"):
            if text.startswith("**>", i) or char == ">":
                if quote is None:
                    quote = (offset, text.startswith("**>", i))
                i += 3 if text.startswith("**>", i) else 1
                continue
            if quote is not None:
                close_quote(offset - 1)  # the quote ended before the previous newline
        if char == "\\" and i + 1 < n and 0 < ord(text[i + 1]) <= 126:
            out.append(text[i + 1])
            offset += 1
            i += 2
            continue
        if char not in ("`" if in_code else _MDV2_RESERVED):
            out.append(char)
            offset += _u16(char)
            i += 1
            continue
        top = stack[-1].kind if stack else None
        closes = (
            (top == "bold" and char == "*")
            or (top == "italic" and char == "_" and not text.startswith("__", i))
            or (top == "underline" and text.startswith("__", i))
            or (top == "strikethrough" and char == "~")
            or (top == "spoiler" and text.startswith("||", i))
            or (top == "code" and char == "`")
            or (top == "pre" and text.startswith("```", i))
            or (top in ("text_link", "custom_emoji") and char == "]")
        )
        if not closes:
            if (
                quote is not None
                and quote[1]
                and text.startswith("||", i)
                and (i + 2 == n or text[i + 2] == "\n")
            ):
                i += 2  # end marker of an expandable block quotation
                continue
            i = _md_open(text, i, offset, stack, reserved_error)
            continue
        entry = stack.pop()
        length = offset - entry.offset
        entity: dict[str, Any] = {"type": entry.kind, "offset": entry.offset, "length": length}
        if entry.kind in ("underline", "spoiler"):
            i += 2
        elif entry.kind == "pre":
            i += 3
            if entry.language:
                entity["language"] = entry.language
        elif entry.kind in ("text_link", "custom_emoji"):
            i += 1
            if i < n and text[i] == "(":
                url, i = _md_url(text, i + 1)
            elif entry.kind == "custom_emoji":
                raise _ParseError("Custom emoji entity must contain a tg://emoji URL")
            else:
                # "[http://x]" without a target: Telegram uses the text itself as the URL.
                url = _plain_slice(out, entry.offset, offset)
            if entry.kind == "custom_emoji":
                emoji_id = url.removeprefix("tg://emoji?id=")
                if emoji_id == url or not emoji_id:
                    raise _ParseError("Custom emoji URL must have the form tg://emoji?id=...")
                entity["custom_emoji_id"] = emoji_id
            elif not url:
                length = 0  # no URL: Telegram keeps the text and drops the entity
            else:
                entity["url"] = url
        else:
            i += 1
        if length > 0:
            entities.append(entity)
    if stack:
        entry = stack[-1]
        raise _ParseError(
            f"Can't find end of {_MDV2_NAMES[entry.kind]} entity at byte offset "
            f"{_byte_offset(text, entry.index)}"
        )
    close_quote(offset)
    return "".join(out), _sort_entities(entities)


def _md_open(
    text: str,
    i: int,
    offset: int,
    stack: list[_OpenMd],
    reserved_error: Callable[[int], _ParseError],
) -> int:
    """Open the MarkdownV2 entity that starts at ``text[i]``; returns the next index."""
    char = text[i]
    start = i
    language: str | None = None
    if char == "_":
        kind, i = ("underline", i + 2) if text.startswith("__", i) else ("italic", i + 1)
    elif char == "*":
        kind, i = "bold", i + 1
    elif char == "~":
        kind, i = "strikethrough", i + 1
    elif char == "|" and text.startswith("||", i):
        kind, i = "spoiler", i + 2
    elif char == "[":
        kind, i = "text_link", i + 1
    elif char == "!" and text.startswith("![", i):
        kind, i = "custom_emoji", i + 2
    elif char == "`" and text.startswith("```", i):
        kind, i = "pre", i + 3
        end = i
        while end < len(text) and not text[end].isspace() and text[end] != "`":
            end += 1
        if end != i and end < len(text) and text[end] != "`":
            language, i = text[i:end], end
        # One line break right after the opening fence (or language) is not part of the code.
        if text.startswith(("\r\n", "\n\r"), i):
            i += 2
        elif text.startswith(("\n", "\r"), i):
            i += 1
    elif char == "`":
        kind, i = "code", i + 1
    else:
        raise reserved_error(i)
    stack.append(_OpenMd(kind, offset, start, language))
    return i


def _md_url(text: str, i: int) -> tuple[str, int]:
    """Read a MarkdownV2 link target starting after "("; returns (url, index after ")")."""
    start = i
    url: list[str] = []
    while i < len(text) and text[i] != ")":
        if text[i] == "\\" and i + 1 < len(text) and 0 < ord(text[i + 1]) <= 126:
            url.append(text[i + 1])
            i += 2
            continue
        url.append(text[i])
        i += 1
    if i >= len(text):
        raise _ParseError(f"Can't find end of a URL at byte offset {_byte_offset(text, start)}")
    return "".join(url), i + 1


def _plain_slice(out: list[str], start: int, end: int) -> str:
    """The output text between two UTF-16 offsets (for ``[url]`` links without a target)."""
    plain = "".join(out)
    units = plain.encode("utf-16-le")
    return units[start * 2 : end * 2].decode("utf-16-le", errors="replace")


def parse_markdown(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse legacy Markdown (``*bold*``, ``_italic_``, code, pre, ``[text](url)``)."""
    out: list[str] = []
    offset = 0
    entities: list[dict[str, Any]] = []
    i = 0
    n = len(text)
    while i < n:
        char = text[i]
        if char == "\\" and i + 1 < n and text[i + 1] in "_*`[":
            out.append(text[i + 1])
            offset += 1
            i += 2
            continue
        if char not in "_*`[":
            out.append(char)
            offset += _u16(char)
            i += 1
            continue
        begin = i
        language: str | None = None
        if text.startswith("```", i):
            kind, closer, i = "pre", "```", i + 3
            end = i
            while end < n and not text[end].isspace() and text[end] != "`":
                end += 1
            if end != i and end < n and text[end] != "`":
                language, i = text[i:end], end
        else:
            kind = {"_": "italic", "*": "bold", "`": "code", "[": "text_link"}[char]
            closer = "]" if char == "[" else char
            i += 1
        end = text.find(closer, i)
        if end == -1:
            raise _ParseError(
                f"Can't find end of the entity starting at byte offset {_byte_offset(text, begin)}"
            )
        inner = text[i:end]
        start_offset = offset
        out.append(inner)
        offset += utf16_len(inner)
        i = end + len(closer)
        entity: dict[str, Any] = {
            "type": kind,
            "offset": start_offset,
            "length": offset - start_offset,
        }
        if language:
            entity["language"] = language
        if kind == "text_link":
            url = ""
            if text.startswith("(", i):
                close = text.find(")", i)
                if close == -1:
                    raise _ParseError(
                        f"Can't find end of a URL at byte offset {_byte_offset(text, i)}"
                    )
                url, i = text[i + 1 : close], close + 1
            if not url:
                continue
            entity["url"] = url
        if entity["length"] > 0:
            entities.append(entity)
    return "".join(out), _sort_entities(entities)


_PARSERS: dict[str, Callable[[str], tuple[str, list[dict[str, Any]]]]] = {
    "html": parse_html,
    "markdownv2": parse_markdown_v2,
    "markdown": parse_markdown,
}


def validate_entities(text: str, entities: Any) -> list[dict[str, Any]]:
    """Check explicit ``entities`` against ``text`` (UTF-16 offsets); raises _ParseError.

    Also rejects an entity boundary inside a surrogate pair: Telegram would silently render
    garbage, and it is the classic symptom of offsets counted in code points, not UTF-16.
    """
    if not isinstance(entities, list):
        raise _ParseError("entities must be an array of MessageEntity objects")
    encoded = text.encode("utf-16-le")
    total = len(encoded) // 2
    checked: list[dict[str, Any]] = []
    for index, entity in enumerate(entities):
        if not isinstance(entity, dict):
            raise _ParseError(f"entity #{index} is not an object")
        kind = entity.get("type")
        where = f"entity #{index} ({kind})"
        if kind not in ENTITY_TYPES:
            raise _ParseError(f"entity #{index}: unsupported type {kind!r}")
        offset, length = entity.get("offset"), entity.get("length")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise _ParseError(f"{where}: offset must be a non-negative integer, got {offset!r}")
        if not isinstance(length, int) or isinstance(length, bool) or length <= 0:
            raise _ParseError(f"{where}: length must be a positive integer, got {length!r}")
        if offset + length > total:
            raise _ParseError(
                f"{where}: offset {offset} + length {length} exceeds the text length of "
                f"{total} UTF-16 code units"
            )
        for boundary in (offset, offset + length):
            if 0 < boundary < total and 0xDC00 <= _unit(encoded, boundary) <= 0xDFFF:
                raise _ParseError(f"{where}: boundary {boundary} splits a surrogate pair")
        if kind == "text_link" and not (isinstance(entity.get("url"), str) and entity["url"]):
            raise _ParseError(f"{where}: text_link requires a non-empty url")
        if kind == "text_mention" and not isinstance(entity.get("user"), dict):
            raise _ParseError(f"{where}: text_mention requires a user")
        if kind == "custom_emoji" and not entity.get("custom_emoji_id"):
            raise _ParseError(f"{where}: custom_emoji requires custom_emoji_id")
        if kind == "date_time" and not isinstance(entity.get("unix_time"), int):
            raise _ParseError(f"{where}: date_time requires unix_time")
        checked.append(dict(entity))
    return checked


def _unit(encoded: bytes, index: int) -> int:
    return int.from_bytes(encoded[index * 2 : index * 2 + 2], "little")


# --------------------------------------------------------------------------------------------
# Request parameter helpers
# --------------------------------------------------------------------------------------------


def _opt_int(params: dict[str, Any], key: str) -> int | None:
    value = params.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise _ApiError(400, f'Bad Request: field "{key}" must be a Number')
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except ValueError:
        raise _ApiError(400, f'Bad Request: field "{key}" must be a Number') from None


def _opt_bool(params: dict[str, Any], key: str) -> bool:
    value = params.get(key)
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1")
    return bool(value)


def update_type(update: dict[str, Any]) -> str:
    """An update's type: its one field besides update_id ("message", "callback_query"...)."""
    return next((key for key in update if key != "update_id"), "")


def _chat_id(params: dict[str, Any]) -> int:
    value = params.get("chat_id")
    if value is None or value == "":
        raise _ApiError(400, "Bad Request: chat_id is empty")
    try:
        return int(value)
    except (TypeError, ValueError):
        # "@channelusername" style ids: this fake only knows numeric chats.
        raise _ApiError(400, "Bad Request: chat not found") from None


_Method = Callable[[dict[str, Any]], Awaitable[Any]]


@dataclass(slots=True)
class _Fault:
    method: str
    status: int
    description: str
    remaining: int
    chat_id: int | None
    retry_after: int | None
    passes: int = 0  # matching calls let through before the fault starts


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class FakeTelegram(LocalServer):
    """Fake Bot API server. ``async with FakeTelegram(token=...) as tg:`` starts and stops it."""

    def __init__(self, token: str = "4242:TEST-TOKEN") -> None:
        super().__init__()
        self.token = token
        self.bot_user: dict[str, Any] = {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": BOT_FIRST_NAME,
            "username": BOT_USERNAME,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self.sent: list[SentMessage] = []
        self.drafts: list[Draft] = []  # every accepted sendMessageDraft, in order
        self.actions: list[tuple[int, str]] = []
        self.action_params: list[dict[str, Any]] = []  # every sendChatAction's parameters
        self.commands: list[dict[str, Any]] = []
        self.errors: list[tuple[str, str]] = []
        self.calls: list[str] = []
        # Per-chat / per-method indexes keep wait predicates O(1): benchmarks send thousands.
        self._sent_by_chat: dict[int, list[SentMessage]] = {}
        self._call_counts: Counter[str] = Counter()
        self._updates: list[dict[str, Any]] = []  # unconfirmed, ascending update_id
        # The update types the bot asked for (getUpdates' or setWebhook's allowed_updates;
        # None: all). Like Telegram, an update of another type is never delivered: it is
        # dropped into `not_delivered`.
        self.allowed_updates: list[str] | None = None
        self.not_delivered: list[dict[str, Any]] = []
        self._last_update_id = 0
        self._chats: dict[int, dict[str, Any]] = {}
        self._messages: dict[int, dict[int, dict[str, Any]]] = {}
        self._next_message_id: dict[int, int] = {}
        self._commands_by_scope: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._faults: list[_Fault] = []
        self._reject_entities: Callable[[dict[str, Any]], bool] | None = None
        self._file_ids = itertools.count(1)
        self._notifier = _Notifier()
        self._poll_generation = 0
        self._polling = 0
        self._closing = False
        self._method_table = self._build_method_table()
        # Webhook: what setWebhook registered, and every delivery attempt.
        self.webhook_url = ""
        self.webhook_secret: str | None = None
        self.webhook_deliveries: list[Delivery] = []
        self.webhook_retry_delay = 0.05
        self._webhook_max_connections = 40
        self._sender: WebhookSender | None = None
        # Flood control: key -> (theoretical arrival time, interval, tolerance), see _flood.
        self._flood_rules: dict[str, tuple[float, float]] = {}
        self._flood_tat: dict[str, float] = {}
        self.flood_refusals = 0
        # Buttons: answers to callback queries, message edits, and each group's administrators.
        self.callback_answers: list[dict[str, Any]] = []
        self.edits: list[dict[str, Any]] = []
        self._admins: dict[int, list[int]] = {}
        self._callback_ids = itertools.count(1)
        # Files: bytes registered by tests (add_file), served by getFile and /file/bot<token>/.
        self.files = FileStore()

    # ---- lifecycle -------------------------------------------------------------------------

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        return app

    def _on_start(self) -> None:
        self._closing = False

    def _on_stop(self) -> None:
        # Release pending long polls so the graceful shutdown does not wait on them.
        self._closing = True
        self._notifier.notify()

    @property
    def base_url(self) -> str:
        return self.origin

    async def start(self) -> None:
        await super().start()
        if self.webhook_url:
            self._start_sender()

    async def stop(self) -> None:
        await self._stop_sender()
        await super().stop()

    # ---- fault injection -------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        status: int,
        description: str,
        times: int = 1,
        *,
        chat_id: int | None = None,
        retry_after: int | None = None,
        after: int = 0,
    ) -> None:
        """Make the next ``times`` calls of ``method`` (optionally only for ``chat_id``) fail,
        once ``after`` such calls have succeeded (the second part of a long answer, say).

        For 429 the response carries ``parameters.retry_after`` (aiogram raises
        TelegramRetryAfter only then); it defaults to the number in "retry after N" or 1.
        """
        if status == 429 and retry_after is None:
            match = re.search(r"retry after (\d+)", description)
            retry_after = int(match.group(1)) if match else 1
        self._faults.append(
            _Fault(method.lower(), status, description, times, chat_id, retry_after, after)
        )

    def flood_control(
        self,
        *,
        chat_rate: float = 1.0,
        chat_burst: int = 3,
        group_per_minute: float = 20.0,
        bot_rate: float = 30.0,
        slack: float = 0.05,
    ) -> None:
        """Answer 429 with ``retry_after`` to sends beyond these limits, as Telegram does:
        ``chat_rate`` messages per second per chat after a burst of ``chat_burst``, also
        ``group_per_minute`` per group and ``bot_rate`` per second in all. ``slack`` seconds
        of tolerance absorb the clock of whoever paces the bot."""
        self._flood_rules = {
            "chat": (1.0 / chat_rate, (chat_burst - 1) / chat_rate + slack),
            "group": (60.0 / group_per_minute, (chat_burst - 1) * 60.0 / group_per_minute + slack),
            "bot": (1.0 / bot_rate, (bot_rate - 1) / bot_rate + slack),
        }
        self._flood_tat.clear()

    def _flood(self, method: str, params: dict[str, Any]) -> None:
        """GCRA over each limit that applies; all must allow the send, or none is counted."""
        if not self._flood_rules or method.lower() not in _PACED:
            return
        chat_id = _chat_id(params)
        keys = [("chat", f"chat:{chat_id}"), ("bot", "bot")]
        if chat_id < 0:
            keys.append(("group", f"group:{chat_id}"))
        now = time.monotonic()
        wait = 0.0
        for rule, key in keys:
            interval, tolerance = self._flood_rules[rule]
            tat = max(self._flood_tat.get(key, now), now)
            wait = max(wait, tat - now - tolerance)
        if wait > 0:
            self.flood_refusals += 1
            raise _ApiError(
                429,
                f"Too Many Requests: retry after {max(1, round(wait + 0.5))}",
                retry_after=max(1, round(wait + 0.5)),
            )
        for rule, key in keys:
            interval, _ = self._flood_rules[rule]
            self._flood_tat[key] = max(self._flood_tat.get(key, now), now) + interval

    def reject_entities_when(self, predicate: Callable[[dict[str, Any]], bool] | None) -> None:
        """Answer 400 "can't parse entities" to formatted sendMessage calls matching predicate.

        Only messages that carry formatting (``entities`` or ``parse_mode``) are affected, so a
        plain-text retry goes through. The predicate gets the decoded request parameters.
        Pass None to stop rejecting.
        """
        self._reject_entities = predicate

    # ---- update builders -------------------------------------------------------------------

    def push_update(self, update: dict[str, Any]) -> int:
        """Enqueue a raw update (``update_id`` is assigned if missing) and wake long polls."""
        update = dict(update)
        if "update_id" in update:
            update_id = int(update["update_id"])
        else:
            update_id = self._last_update_id + 1
            update["update_id"] = update_id
        self._last_update_id = max(self._last_update_id, update_id)
        for key in ("message", "edited_message", "channel_post"):
            message = update.get(key)
            if isinstance(message, dict) and isinstance(message.get("chat"), dict):
                self._remember(message)
        bisect.insort(self._updates, update, key=lambda u: int(u["update_id"]))
        self._notifier.notify()
        return update_id

    def push_text(
        self,
        chat_id: int,
        text: str,
        *,
        entities: list[dict[str, Any]] | None = None,
        **options: Unpack[MessageOptions],
    ) -> int:
        """Enqueue a text message from a user.

        ``chat_type`` defaults to "private" for positive ids and "group"/"supergroup" for
        negative ones; ``user_id`` defaults to ``chat_id`` in private chats. Text starting with
        "/" gets a ``bot_command`` entity unless one is supplied at offset 0.
        """
        message = self._incoming(chat_id, options)
        message["text"] = text
        all_entities = [dict(e) for e in entities or []]
        if text.startswith("/") and not any(e.get("offset") == 0 for e in all_entities):
            command = text.split(maxsplit=1)[0]
            all_entities.insert(
                0, {"type": "bot_command", "offset": 0, "length": utf16_len(command)}
            )
        if all_entities:
            message["entities"] = all_entities
        return self.push_update({"message": message})

    def push_edit(
        self,
        chat_id: int,
        text: str,
        *,
        message_id: int | None = None,
        entities: list[dict[str, Any]] | None = None,
    ) -> int:
        """Enqueue an ``edited_message``: the user changed the text of their message
        ``message_id`` (by default the chat's latest from a user, sent earlier with a
        ``push_*`` builder) to ``text``. Telegram sends the whole message again, with its new
        text and entities and an ``edit_date``."""
        known = self._messages.get(chat_id, {})
        if message_id is None:
            users = [i for i, m in known.items() if m.get("from", {}).get("id") != BOT_ID]
            message_id = max(users, default=0)
        original = known.get(message_id)
        if original is None or original.get("from", {}).get("id") == BOT_ID:
            raise ValueError(f"chat {chat_id} has no user message {message_id} to edit")
        message = {k: v for k, v in original.items() if k not in ("text", "entities", "edit_date")}
        message["text"] = text
        message["edit_date"] = int(message["date"]) + 1
        all_entities = [dict(e) for e in entities or []]
        if text.startswith("/") and not any(e.get("offset") == 0 for e in all_entities):
            command = text.split(maxsplit=1)[0]
            all_entities.insert(
                0, {"type": "bot_command", "offset": 0, "length": utf16_len(command)}
            )
        if all_entities:
            message["entities"] = all_entities
        return self.push_update({"edited_message": message})

    def push_mention(
        self,
        chat_id: int,
        text_without_mention: str,
        *,
        entities: list[dict[str, Any]] | None = None,
        **options: Unpack[MessageOptions],
    ) -> int:
        """Enqueue "@membot_test_bot <text>" with a ``mention`` entity."""
        mention = f"@{BOT_USERNAME}"
        shift = utf16_len(mention) + 1
        shifted = [{**e, "offset": int(e["offset"]) + shift} for e in entities or []]
        return self.push_text(
            chat_id,
            f"{mention} {text_without_mention}",
            entities=[{"type": "mention", "offset": 0, "length": shift - 1}, *shifted],
            **options,
        )

    def push_sticker(
        self, chat_id: int, *, emoji: str = "👍", **options: Unpack[MessageOptions]
    ) -> int:
        message = self._incoming(chat_id, options)
        message["sticker"] = {
            **self._file("sticker"),
            "type": "regular",
            "width": 512,
            "height": 512,
            "is_animated": False,
            "is_video": False,
            "emoji": emoji,
        }
        return self.push_update({"message": message})

    def push_pinned(
        self, chat_id: int, pinned_message_id: int, **options: Unpack[MessageOptions]
    ) -> int:
        """A service message: the user pinned ``pinned_message_id`` (one of the bot's, say)."""
        message = self._incoming(chat_id, options)
        pinned = self._messages.get(chat_id, {}).get(pinned_message_id)
        if pinned is None:
            raise ValueError(f"chat {chat_id} has no message {pinned_message_id} to pin")
        message["pinned_message"] = {k: v for k, v in pinned.items() if k != "reply_to_message"}
        return self.push_update({"message": message})

    def push_photo(
        self,
        chat_id: int,
        *,
        caption: str | None = None,
        data: bytes | None = None,
        width: int = 1280,
        height: int = 1280,
        media_group_id: str | None = None,
        caption_entities: list[dict[str, Any]] | None = None,
        **options: Unpack[MessageOptions],
    ) -> int:
        """A photo in two sizes; with ``data``, its larger size is those bytes (getFile).
        ``media_group_id``: a part of an album (Telegram sends one update per part)."""
        message = self._incoming(chat_id, options)
        large = self.files.add(data, "photo") if data is not None else self._file("photo")
        message["photo"] = [
            {**self._file("photo"), "width": 90, "height": 90, "file_size": 1_200},
            {"file_size": 98_000, **large, "width": width, "height": height},
        ]
        if caption is not None:
            message["caption"] = caption
        if caption_entities:
            message["caption_entities"] = caption_entities
        if media_group_id is not None:
            message["media_group_id"] = media_group_id
        return self.push_update({"message": message})

    def push_audio(
        self,
        chat_id: int,
        data: bytes,
        *,
        duration: int = 3,
        file_name: str = "song.ogg",
        mime_type: str = "audio/ogg",
        caption: str | None = None,
        **options: Unpack[MessageOptions],
    ) -> int:
        """An audio file (music, a recording sent as a file)."""
        message = self._incoming(chat_id, options)
        file = self.files.add(data, "audio")
        message["audio"] = {
            **file,
            "duration": duration,
            "file_name": file_name,
            "mime_type": mime_type,
        }
        if caption is not None:
            message["caption"] = caption
        return self.push_update({"message": message})

    def push_voice(
        self,
        chat_id: int,
        *,
        duration: int = 3,
        data: bytes | None = None,
        **options: Unpack[MessageOptions],
    ) -> int:
        """A voice message; with ``data``, those bytes can be downloaded (getFile)."""
        message = self._incoming(chat_id, options)
        file = self.files.add(data, "voice") if data is not None else self._file("voice")
        message["voice"] = {
            "file_size": 6_000 * duration,
            **file,
            "duration": duration,
            "mime_type": "audio/ogg",
        }
        return self.push_update({"message": message})

    def push_video_note(
        self,
        chat_id: int,
        data: bytes,
        *,
        duration: int = 3,
        length: int = 240,
        **options: Unpack[MessageOptions],
    ) -> int:
        """A round video note of ``data`` (an MP4)."""
        message = self._incoming(chat_id, options)
        file = self.files.add(data, "video_note")
        message["video_note"] = {**file, "duration": duration, "length": length}
        return self.push_update({"message": message})

    def push_document(
        self,
        chat_id: int,
        data: bytes,
        *,
        file_name: str,
        mime_type: str | None = None,
        caption: str | None = None,
        declare_size: bool = True,
        media_group_id: str | None = None,
        **options: Unpack[MessageOptions],
    ) -> int:
        """A file sent as a document (a PDF, a text file, an image sent uncompressed).
        Without ``declare_size`` the message says nothing of its size (getFile still does)."""
        message = self._incoming(chat_id, options)
        document: dict[str, Any] = {**self.files.add(data, "document", file_name)}
        if not declare_size:
            del document["file_size"]
        if media_group_id is not None:
            message["media_group_id"] = media_group_id
        document["file_name"] = file_name
        if mime_type is not None:
            document["mime_type"] = mime_type
        message["document"] = document
        if caption is not None:
            message["caption"] = caption
        return self.push_update({"message": message})

    def push_callback(
        self, chat_id: int, message_id: int, data: str, **options: Unpack[MessageOptions]
    ) -> int:
        """A user pressed a button (with ``data``) under the bot's message ``message_id``."""
        message = self._messages.get(chat_id, {}).get(message_id)
        if message is None:
            raise ValueError(f"chat {chat_id} has no message {message_id}")
        user = self._incoming(chat_id, options)["from"]
        query = {
            "id": f"cbq-{next(self._callback_ids)}",
            "from": user,
            "message": message,
            "chat_instance": f"ci-{chat_id}",
            "data": data,
        }
        return self.push_update({"callback_query": query})

    def press_stop(self, chat_id: int, draft_id: int) -> int:
        """The user pressed Stop on the draft `draft_id` (Telegram shows the button only on a
        draft sent with can_stop): a `stopped_message_generation` update, as Bot API 10.3."""
        if not any(d.draft_id == draft_id and d.can_stop for d in self.drafts_to(chat_id)):
            raise ValueError(f"chat {chat_id} was shown no draft {draft_id} with a Stop button")
        return self.push_stop(chat_id, draft_id)

    def push_stop(self, chat_id: int, draft_id: int) -> int:
        """A `stopped_message_generation` update for any draft id (press_stop checks that
        the button was there)."""
        stopped = {"chat": self._chat(chat_id), "draft_id": draft_id}
        return self.push_update({"stopped_message_generation": stopped})

    def set_admins(self, chat_id: int, user_ids: list[int]) -> None:
        """The group's administrators, as getChatAdministrators reports them (first: owner)."""
        self._admins[chat_id] = list(user_ids)

    # ---- inspection and waiting ------------------------------------------------------------

    def messages_to(self, chat_id: int) -> list[SentMessage]:
        return list(self._sent_by_chat.get(chat_id, ()))

    def call_count(self, method: str) -> int:
        """How many times ``method`` was called (case-insensitive, failed calls included)."""
        return self._call_counts[method.lower()]

    def pending_updates(self) -> int:
        """Updates not yet confirmed by a getUpdates ``offset``."""
        return len(self._updates)

    @property
    def polling(self) -> int:
        """Number of getUpdates requests currently waiting."""
        return self._polling

    async def wait_until(
        self, predicate: Callable[[], bool], timeout: float = 10.0, *, what: str = "condition"
    ) -> None:
        """Wait until ``predicate()`` holds; AssertionError with the server's state otherwise."""
        if not await self._notifier.wait_for(predicate, timeout):
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}\n{self.describe()}"
            )

    async def wait_for_messages(
        self, chat_id: int, count: int, timeout: float = 10.0
    ) -> list[SentMessage]:
        """The first ``count`` messages sent to ``chat_id``, once that many exist."""

        def enough() -> bool:
            return len(self._sent_by_chat.get(chat_id, ())) >= count

        await self.wait_until(enough, timeout, what=f"{count} message(s) to chat {chat_id}")
        return self.messages_to(chat_id)[:count]

    async def wait_for_total(self, count: int, timeout: float = 10.0) -> list[SentMessage]:
        """The first ``count`` messages sent to any chat, once that many exist."""
        await self.wait_until(
            lambda: len(self.sent) >= count, timeout, what=f"{count} message(s) in total"
        )
        return self.sent[:count]

    async def wait_for_call(self, method: str, timeout: float = 10.0, count: int = 1) -> None:
        """Wait until ``method`` has been called at least ``count`` times (ever)."""
        await self.wait_until(
            lambda: self.call_count(method) >= count, timeout, what=f"{count} call(s) of {method}"
        )

    def describe(self) -> str:
        """Human-readable state, used in timeout messages."""
        lines = [f"sent ({len(self.sent)}):"]
        lines += [f"  chat {m.chat_id} #{m.message_id}: {m.text[:120]!r}" for m in self.sent]
        lines.append(f"errors: {self.errors}")
        lines.append(f"last calls: {self.calls[-20:]}")
        lines.append(f"pending updates: {self.pending_updates()}, polling: {self._polling}")
        return "\n".join(lines)

    # ---- message store ---------------------------------------------------------------------

    def _allocate_message_id(self, chat_id: int) -> int:
        message_id = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = message_id + 1
        return message_id

    def _remember(self, message: dict[str, Any]) -> None:
        chat = message["chat"]
        chat_id = int(chat["id"])
        self._chats.setdefault(chat_id, dict(chat))
        message_id = int(message.get("message_id", 0))
        self._messages.setdefault(chat_id, {})[message_id] = message
        # Raw updates may carry their own ids: keep the counter ahead of them.
        if message_id >= self._next_message_id.get(chat_id, 1):
            self._next_message_id[chat_id] = message_id + 1

    def _chat(self, chat_id: int) -> dict[str, Any]:
        chat = self._chats.get(chat_id)
        if chat is not None:
            return chat
        if chat_id > 0:
            return {"id": chat_id, "type": "private", "first_name": "Alice"}
        kind = "supergroup" if chat_id <= _SUPERGROUP_ID_LIMIT else "group"
        return {"id": chat_id, "type": kind, "title": f"Group {chat_id}"}

    def _bot_message(self, chat_id: int, text: str) -> dict[str, Any]:
        message = {
            "message_id": self._allocate_message_id(chat_id),
            "date": int(time.time()),
            "chat": self._chat(chat_id),
            "from": dict(self.bot_user),
            "text": text,
        }
        self._remember(message)
        return message

    def _file(self, kind: str) -> dict[str, Any]:
        n = next(self._file_ids)
        return {"file_id": f"fake-{kind}-{n}", "file_unique_id": f"u-{kind}-{n}"}

    def _incoming(self, chat_id: int, options: MessageOptions) -> dict[str, Any]:
        """A message dict from a user in ``chat_id``; registers the chat on first use."""
        chat_type = options.get("chat_type") or self._chat(chat_id)["type"]
        if chat_type == "private" and chat_id <= 0:
            raise ValueError(f"private chat ids are positive user ids, got {chat_id}")
        user_id = options.get("user_id")
        if user_id is None:
            user_id = chat_id if chat_type == "private" else DEFAULT_GROUP_USER_ID
        user: dict[str, Any] = {
            "id": user_id,
            "is_bot": False,
            "first_name": options.get("first_name", "Alice"),
        }
        for key in ("last_name", "username", "language_code"):
            value = options.get(key)
            if value is not None:
                user[key] = value
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat.update(
                (k, v) for k, v in user.items() if k in ("first_name", "last_name", "username")
            )
        else:
            chat["title"] = (
                options.get("title")
                or self._chats.get(chat_id, {}).get("title")
                or f"Group {chat_id}"
            )
        self._chats[chat_id] = chat
        # Resolve the reply target first: a synthetic bot message must get the earlier id.
        reply_to = options.get("reply_to")
        if options.get("reply_to_bot") and reply_to is None:
            from_bot = [
                m
                for m in self._messages.get(chat_id, {}).values()
                if m.get("from", {}).get("id") == BOT_ID
            ]
            target = from_bot[-1] if from_bot else self._bot_message(chat_id, "Earlier bot message")
            reply_to = int(target["message_id"])
        message: dict[str, Any] = {
            "message_id": self._allocate_message_id(chat_id),
            "date": int(time.time()),
            "chat": chat,
            "from": user,
        }
        thread_id = options.get("thread_id")
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        if reply_to is not None:
            quoted = self._messages.get(chat_id, {}).get(reply_to)
            if quoted is None:
                raise ValueError(f"chat {chat_id} has no message {reply_to} to reply to")
            # Telegram does not nest replies: the quoted message has no reply_to_message.
            message["reply_to_message"] = {
                k: v for k, v in quoted.items() if k != "reply_to_message"
            }
        return message

    # ---- HTTP ------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        handler = self._method_table.get(method.lower())
        canonical = handler[0] if handler else method
        self.calls.append(canonical)
        self._call_counts[canonical.lower()] += 1
        self._notifier.notify()
        if request.match_info["token"] != self.token:
            return self._error_response(request, canonical, _ApiError(401, "Unauthorized"))
        try:
            params = await self._read_params(request)
            fault = self._take_fault(canonical, params)
            if fault is not None:
                raise _ApiError(fault.status, fault.description, fault.retry_after)
            self._flood(canonical, params)
            if handler is None:
                raise _ApiError(404, "Not Found: method not found")
            result = await handler[1](params)
        except _ApiError as exc:
            return self._error_response(request, canonical, exc)
        finally:
            self._notifier.notify()
        return web.json_response({"ok": True, "result": result})

    def _error_response(self, request: web.Request, method: str, exc: _ApiError) -> web.Response:
        log.debug("FakeTelegram %s -> %d %s", method, exc.status, exc.description)
        # An answer to a client that already hung up (a superseded long poll racing its own
        # cancellation) reaches nobody, so it is not an error the bot saw.
        if request.transport is not None and not request.transport.is_closing():
            self.errors.append((method, exc.description))
            self._notifier.notify()
        body: dict[str, Any] = {
            "ok": False,
            "error_code": exc.status,
            "description": exc.description,
        }
        if exc.retry_after is not None:
            body["parameters"] = {"retry_after": exc.retry_after}
        return web.json_response(body, status=exc.status)

    async def _read_params(self, request: web.Request) -> dict[str, Any]:
        """Merge query string and body (JSON, urlencoded or multipart) into one dict."""
        params: dict[str, Any] = dict(request.query)
        if request.body_exists:
            if request.content_type == "application/json":
                try:
                    body = await request.json()
                except ValueError:
                    raise _ApiError(400, "Bad Request: can't parse JSON body") from None
                if not isinstance(body, dict):
                    raise _ApiError(400, "Bad Request: JSON body must be an object")
                params.update(body)
            elif request.content_type in (
                "application/x-www-form-urlencoded",
                "multipart/form-data",
            ):
                form = await request.post()
                params.update(form.items())
            else:
                raise _ApiError(
                    400, f"Bad Request: unsupported Content-Type {request.content_type}"
                )
        for key in _JSON_FIELDS & params.keys():
            value = params[key]
            if isinstance(value, str):
                try:
                    params[key] = json.loads(value)
                except ValueError:
                    raise _ApiError(
                        400, f"Bad Request: can't parse {key.replace('_', ' ')} JSON object"
                    ) from None
        return params

    def _take_fault(self, method: str, params: dict[str, Any]) -> _Fault | None:
        for fault in self._faults:
            if fault.method != method.lower():
                continue
            if fault.chat_id is not None and params.get("chat_id") not in (
                fault.chat_id,
                str(fault.chat_id),
            ):
                continue
            if fault.passes > 0:
                fault.passes -= 1
                return None
            fault.remaining -= 1
            if fault.remaining <= 0:
                self._faults.remove(fault)
            return fault
        return None

    def _build_method_table(self) -> dict[str, tuple[str, _Method]]:
        # Bot API method names are case-insensitive; `calls` records the canonical spelling.
        table: Iterable[tuple[str, _Method]] = (
            ("getMe", self._get_me),
            ("getUpdates", self._get_updates),
            ("setWebhook", self._set_webhook),
            ("deleteWebhook", self._delete_webhook),
            ("getWebhookInfo", self._get_webhook_info),
            ("sendMessage", self._send_message),
            ("sendChatAction", self._send_chat_action),
            ("sendMessageDraft", self._send_message_draft),
            ("getChatAdministrators", self._get_chat_administrators),
            ("getFile", self._get_file),
            ("answerCallbackQuery", self._answer_callback_query),
            ("editMessageText", self._edit_message_text),
            ("setMyCommands", self._set_my_commands),
            ("getMyCommands", self._get_my_commands),
            ("deleteMyCommands", self._delete_my_commands),
            ("close", self._ok),
            ("logOut", self._ok),
        )
        return {name.lower(): (name, handler) for name, handler in table}

    # ---- Bot API methods -------------------------------------------------------------------

    async def _ok(self, params: dict[str, Any]) -> bool:
        return True

    async def _get_me(self, params: dict[str, Any]) -> dict[str, Any]:
        return dict(self.bot_user)

    def add_file(self, data: bytes, kind: str = "document", file_name: str = "") -> dict[str, Any]:
        """Register ``data`` for getFile and download; the message's file fields."""
        return self.files.add(data, kind, file_name)

    async def _get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.files.get_file(params.get("file_id"))
        except FileError as exc:
            raise _ApiError(exc.status, exc.description) from None

    async def _download(self, request: web.Request) -> web.Response:
        self.calls.append("download")
        self._call_counts["download"] += 1
        self._notifier.notify()
        if request.match_info["token"] != self.token:
            return web.json_response(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401
            )
        data = self.files.download(request.match_info["path"])
        if data is None:
            return web.json_response(
                {"ok": False, "error_code": 404, "description": "Not Found"}, status=404
            )
        return web.Response(body=data, content_type="application/octet-stream")

    async def _set_webhook(self, params: dict[str, Any]) -> bool:
        url = params.get("url")
        if not isinstance(url, str):
            raise _ApiError(400, "Bad Request: url is required")
        if not url:
            return await self._delete_webhook(params)  # Telegram: an empty url removes it
        # Telegram requires https; the fake also takes http, for servers on 127.0.0.1.
        if not url.startswith(("https://", "http://")):
            raise _ApiError(400, "Bad Request: bad webhook: An HTTPS URL must be provided")
        secret = params.get("secret_token") or None
        if secret is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", str(secret)):
            raise _ApiError(400, "Bad Request: secret token contains unallowed characters")
        if _opt_bool(params, "drop_pending_updates"):
            self._updates.clear()
        self._webhook_max_connections = _opt_int(params, "max_connections") or 40
        self._set_allowed(params)
        await self._stop_sender()
        self.webhook_url, self.webhook_secret = url, secret
        self._start_sender()
        self._poll_generation += 1  # a waiting getUpdates ends with a conflict
        self._notifier.notify()
        return True

    async def _delete_webhook(self, params: dict[str, Any]) -> bool:
        await self._stop_sender()
        self.webhook_url, self.webhook_secret = "", None
        if _opt_bool(params, "drop_pending_updates"):
            self._updates.clear()
        return True

    async def _get_webhook_info(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
            "max_connections": self._webhook_max_connections,
        }

    def _start_sender(self) -> None:
        self._sender = WebhookSender(
            url=self.webhook_url,
            secret=self.webhook_secret,
            max_connections=self._webhook_max_connections,
            retry_delay=self.webhook_retry_delay,
            pending=lambda: list(self._deliverable()),
            delivered=self._webhook_delivered,
            failed=self._webhook_failed,
            changed=lambda: self._notifier.current,
            notify=self._notifier.notify,
        )
        self._sender.start()

    async def _stop_sender(self) -> None:
        sender, self._sender = self._sender, None
        if sender is not None:
            await sender.stop()

    def _webhook_delivered(self, update_id: int, status: int) -> None:
        self.webhook_deliveries.append(Delivery(update_id, status))
        self._updates = [u for u in self._updates if int(u["update_id"]) != update_id]
        self._notifier.notify()

    def _webhook_failed(self, update_id: int, status: int) -> None:
        self.webhook_deliveries.append(Delivery(update_id, status))
        self._notifier.notify()

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook_url:
            raise _ApiError(409, _WEBHOOK_ACTIVE)
        offset = _opt_int(params, "offset")
        limit = min(max(_opt_int(params, "limit") or 100, 1), 100)
        timeout = max(_opt_int(params, "timeout") or 0, 0)
        if offset is not None:
            if offset < 0:
                # Negative offset: keep only the last -offset updates, forget the rest.
                del self._updates[: max(len(self._updates) + offset, 0)]
            else:
                self._updates = [u for u in self._updates if int(u["update_id"]) >= offset]
        # Like Telegram, a new poll terminates any older one still waiting (409 Conflict):
        # that is how two bot instances polling one token show up.
        self._poll_generation += 1
        generation = self._poll_generation
        self._notifier.notify()
        self._polling += 1
        try:
            self._set_allowed(params)
            await self._notifier.wait_for(
                lambda: (
                    bool(self._deliverable())
                    or self._closing
                    or self._poll_generation != generation
                ),
                timeout,
            )
        finally:
            self._polling -= 1
        if self._poll_generation != generation and not self._closing:
            raise _ApiError(409, _CONFLICT)
        return self._deliverable()[:limit]

    def _set_allowed(self, params: dict[str, Any]) -> None:
        """Telegram keeps the last allowed_updates given; an empty list means all."""
        allowed = params.get("allowed_updates")
        if isinstance(allowed, list):
            self.allowed_updates = [str(kind) for kind in allowed] or None

    def _deliverable(self) -> list[dict[str, Any]]:
        """The unconfirmed updates, without those of a type the bot did not ask for."""
        allowed = self.allowed_updates
        if allowed is not None:
            unwanted = [u for u in self._updates if update_type(u) not in allowed]
            if unwanted:
                self.not_delivered.extend(unwanted)
                self._updates = [u for u in self._updates if update_type(u) in allowed]
        return self._updates

    async def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = _chat_id(params)
        raw = params.get("text")
        if not isinstance(raw, str) or not raw.strip():
            raise _ApiError(400, "Bad Request: message text is empty")
        parse_mode = params.get("parse_mode") or None
        if parse_mode is not None and not isinstance(parse_mode, str):
            raise _ApiError(400, "Bad Request: unsupported parse_mode")
        if parse_mode is not None and parse_mode.lower() == "none":
            parse_mode = None  # the Bot API's explicit "no markup" value
        explicit = params.get("entities")
        formatted = parse_mode is not None or bool(explicit)
        if formatted and self._reject_entities is not None and self._reject_entities(params):
            raise _bad_entities("rejected by the test (reject_entities_when)")
        try:
            if parse_mode is not None:
                # Telegram ignores `entities` when a parse_mode is given.
                parser = _PARSERS.get(parse_mode.lower())
                if parser is None:
                    raise _ApiError(400, "Bad Request: unsupported parse_mode")
                text, entities = parser(raw)
            else:
                text = raw
                entities = validate_entities(raw, explicit) if explicit else []
        except _ParseError as exc:
            raise _bad_entities(str(exc)) from None
        if not text.strip():
            raise _ApiError(400, "Bad Request: message text is empty")
        if utf16_len(text) > MAX_MESSAGE_LENGTH:
            raise _ApiError(400, "Bad Request: message is too long")
        reply_to = self._reply_target(chat_id, params)
        message = self._bot_message(chat_id, text)
        if entities:
            message["entities"] = entities
        if reply_to is not None:
            message["reply_to_message"] = {
                k: v for k, v in reply_to.items() if k != "reply_to_message"
            }
        markup = params.get("reply_markup")
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            message["reply_markup"] = markup
        self._record(
            SentMessage(
                chat_id=chat_id,
                text=text,
                entities=entities,
                parse_mode=parse_mode,
                reply_to_message_id=int(reply_to["message_id"]) if reply_to else None,
                message_id=int(message["message_id"]),
                raw_text=raw,
                params=params,
                at=time.monotonic(),
            )
        )
        return message

    def _record(self, sent: SentMessage) -> None:
        self.sent.append(sent)
        self._sent_by_chat.setdefault(sent.chat_id, []).append(sent)

    def _reply_target(self, chat_id: int, params: dict[str, Any]) -> dict[str, Any] | None:
        reply = params.get("reply_parameters")
        allow_missing = _opt_bool(params, "allow_sending_without_reply")
        if isinstance(reply, dict):
            target_id = _opt_int(reply, "message_id")
            allow_missing = allow_missing or _opt_bool(reply, "allow_sending_without_reply")
            if reply.get("chat_id") not in (None, chat_id, str(chat_id)):
                raise _ApiError(400, "Bad Request: cross-chat replies are not supported here")
        else:
            target_id = _opt_int(params, "reply_to_message_id")
        if target_id is None:
            return None
        target = self._messages.get(chat_id, {}).get(target_id)
        if target is None and not allow_missing:
            raise _ApiError(400, "Bad Request: message to be replied not found")
        return target

    def drafts_to(self, chat_id: int) -> list[Draft]:
        return [d for d in self.drafts if d.chat_id == chat_id]

    async def _send_message_draft(self, params: dict[str, Any]) -> bool:
        """Private chats only, as Telegram; a non-zero draft_id; text of at most 4096."""
        chat_id = _chat_id(params)
        if self._chat(chat_id).get("type") != "private":
            raise _ApiError(400, "Bad Request: drafts can be sent only to private chats")
        draft_id = _opt_int(params, "draft_id")
        if not draft_id:
            raise _ApiError(400, "Bad Request: draft_id must be non-zero")
        raw = params.get("text") or ""
        if not isinstance(raw, str):
            raise _ApiError(400, "Bad Request: text must be a string")
        explicit = params.get("entities")
        if explicit and self._reject_entities is not None and self._reject_entities(params):
            raise _bad_entities("rejected by the test (reject_entities_when)")
        try:
            entities = validate_entities(raw, explicit) if explicit else []
        except _ParseError as exc:
            raise _bad_entities(str(exc)) from None
        if utf16_len(raw) > MAX_MESSAGE_LENGTH:
            raise _ApiError(400, "Bad Request: text is too long")
        can_stop = _opt_bool(params, "can_stop")
        self.drafts.append(Draft(chat_id, draft_id, raw, entities, can_stop, time.monotonic()))
        return True

    async def _send_chat_action(self, params: dict[str, Any]) -> bool:
        chat_id = _chat_id(params)
        action = params.get("action")
        if action not in CHAT_ACTIONS:
            raise _ApiError(400, "Bad Request: wrong parameter action in request")
        self.actions.append((chat_id, str(action)))
        self.action_params.append(params)
        return True

    async def _get_chat_administrators(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        chat_id = _chat_id(params)
        if chat_id > 0:
            raise _ApiError(400, "Bad Request: there are no administrators in the private chat")
        members: list[dict[str, Any]] = []
        for n, user_id in enumerate(self._admins.get(chat_id, [])):
            user = {"id": user_id, "is_bot": False, "first_name": f"Admin {user_id}"}
            if n == 0:
                members.append({"status": "creator", "user": user, "is_anonymous": False})
                continue
            rights = [
                "can_be_edited",
                "can_manage_chat",
                "can_delete_messages",
                "can_manage_video_chats",
                "can_restrict_members",
                "can_promote_members",
                "can_change_info",
                "can_invite_users",
                "can_post_stories",
                "can_edit_stories",
                "can_delete_stories",
                "can_send_welcome_messages",
            ]
            members.append(
                {"status": "administrator", "user": user, "is_anonymous": False}
                | dict.fromkeys(rights, n == 1)
            )
        return members

    async def _answer_callback_query(self, params: dict[str, Any]) -> bool:
        if not params.get("callback_query_id"):
            raise _ApiError(400, "Bad Request: query is too old or query ID is invalid")
        self.callback_answers.append(params)
        return True

    async def _edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = _chat_id(params)
        message_id = _opt_int(params, "message_id")
        message = self._messages.get(chat_id, {}).get(message_id or 0)
        if message is None:
            raise _ApiError(400, "Bad Request: message to edit not found")
        if message.get("from", {}).get("id") != BOT_ID:
            raise _ApiError(400, "Bad Request: message can't be edited")
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise _ApiError(400, "Bad Request: message text is empty")
        markup = params.get("reply_markup")
        if text == message.get("text") and markup == message.get("reply_markup"):
            raise _ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and reply "
                "markup are exactly the same as a current content and reply markup of the message",
            )
        message["text"] = text
        if isinstance(markup, dict):
            message["reply_markup"] = markup
        self.edits.append(params)
        return message

    def commands_for(self, language_code: str = "") -> list[dict[str, Any]]:
        """The menu registered for the default scope and this language ("" = all)."""
        key = (json.dumps({"type": "default"}, sort_keys=True), language_code)
        return list(self._commands_by_scope.get(key, []))

    @staticmethod
    def _scope_key(params: dict[str, Any]) -> tuple[str, str]:
        scope = params.get("scope") or {"type": "default"}
        return json.dumps(scope, sort_keys=True), str(params.get("language_code") or "")

    async def _set_my_commands(self, params: dict[str, Any]) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list):
            raise _ApiError(400, "Bad Request: commands must be an array")
        if len(commands) > 100:
            raise _ApiError(400, "Bad Request: too many commands")
        for command in commands:
            name = command.get("command") if isinstance(command, dict) else None
            if not isinstance(name, str) or not _COMMAND_RE.fullmatch(name):
                raise _ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
            description = command.get("description")
            if not isinstance(description, str) or not 1 <= len(description.strip()) <= 256:
                raise _ApiError(400, "Bad Request: BOT_COMMAND_DESCRIPTION_INVALID")
        self.commands = [dict(c) for c in commands]
        self._commands_by_scope[self._scope_key(params)] = self.commands
        return True

    async def _get_my_commands(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        return list(self._commands_by_scope.get(self._scope_key(params), []))

    async def _delete_my_commands(self, params: dict[str, Any]) -> bool:
        self._commands_by_scope.pop(self._scope_key(params), None)
        self.commands = []
        return True
