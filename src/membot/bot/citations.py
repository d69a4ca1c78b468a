"""What an answer rests on, as Telegram shows it under the answer (bot/render.py puts it
between the answer and its labels): the earlier messages of the chat it cites and does not
reply to, as dated quotes, then its sources, numbered lines each a link whose text is the
page's title."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import Any
from urllib.parse import urlsplit

from membot.memory.contract.citation import Citation
from membot.memory.contract.models import Source

#: Text and its entities (Telegram's, UTF-16 offsets).
Block = tuple[str, list[dict[str, Any]]]

#: A source's link text (its title, else its address) is cut at this many characters.
LINK_CHARS = 100
#: A cited message's author is cut at this many characters.
AUTHOR_CHARS = 64
#: How a citation's date is shown by an app that knows date_time entities (a long date).
DATE_FORMAT = "D"


def cited_list(citations: Sequence[Citation], head: str = "", me: str = "") -> Block:
    """The messages an answer cites, as Telegram text: `head` in bold, then a quotation
    each: who wrote it (`me` for the bot's own answers), when (a date_time entity, which
    each reader's app shows in their own way; the date in UTC for one that does not) and
    the cited part."""
    text = head
    ents: list[dict[str, Any]] = []
    if head:
        ents.append({"type": "bold", "offset": 0, "length": utf16_len(head)})
    for citation in citations:
        text += "\n" if text else ""
        start = utf16_len(text)
        author = me if citation.role == "assistant" and me else citation.author
        author = " ".join(author.split())[:AUTHOR_CHARS] or citation.role
        date = f"{citation.ts.astimezone(UTC):%Y-%m-%d}"
        text += f"{author}, "
        when = {"type": "date_time", "offset": utf16_len(text), "length": len(date)}
        text += f"{date}: “{' '.join(citation.quote.split())}”"
        ents.append({"type": "blockquote", "offset": start, "length": utf16_len(text) - start})
        ents.append(
            {**when, "unix_time": int(citation.ts.timestamp()), "date_time_format": DATE_FORMAT}
        )
    return text, ents


def source_list(sources: Sequence[Source], head: str = "") -> Block:
    """An answer's sources as Telegram text: `head` in bold, then one numbered line each,
    its title (else its address) a link to it. An address that is not http(s) is shown,
    not linked: Telegram refuses such a link, and with it the message's formatting."""
    text = head
    ents: list[dict[str, Any]] = []
    if head:
        ents.append({"type": "bold", "offset": 0, "length": utf16_len(head)})
    for n, source in enumerate(sources, 1):
        label = _link_text(source)
        text += f"\n{n}. " if text else f"{n}. "
        if linkable(source.url):
            link = {"type": "text_link", "offset": utf16_len(text), "length": utf16_len(label)}
            ents.append({**link, "url": source.url})
        text += label
    return text, ents


def linkable(url: str) -> bool:
    """An http(s) address with a host and nothing Telegram would refuse in a link (a space,
    a control character): else it is shown as text, not linked (a refused link would cost
    the whole message its formatting)."""
    if not url.lower().startswith(("https://", "http://")):
        return False
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return False
    try:
        return bool(urlsplit(url).hostname)
    except ValueError:  # a malformed port or IPv6 address
        return False


def _link_text(source: Source) -> str:
    title = " ".join(source.title.split())
    if not title:
        title = source.url.split("://", 1)[-1].rstrip("/") or source.url
    return title if len(title) <= LINK_CHARS else title[: LINK_CHARS - 1].rstrip() + "…"


def utf16_len(text: str) -> int:
    """The length Telegram counts: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2
