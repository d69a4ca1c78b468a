"""LLM Markdown -> Telegram messages: entities (never a parse mode), split at 4096 UTF-16 units."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import telegramify_markdown
from aiogram import Bot
from aiogram.types import Message, ReplyParameters

from membot.bot.citations import Block, source_list, utf16_len
from membot.bot.send import send_text
from membot.memory.contract.models import Source

log = logging.getLogger(__name__)

TELEGRAM_LIMIT = 4096
# Telegram applies at most 100 entities per message; more are an error in some clients.
MAX_ENTITIES = 100


@dataclass(frozen=True, slots=True)
class Part:
    """One Telegram message: plain text plus entities with UTF-16 offsets."""

    text: str
    entities: list[dict[str, Any]] = field(default_factory=list)


def render(
    markdown: str,
    limit: int = TELEGRAM_LIMIT,
    *,
    quote: str = "",
    sources: Sequence[Source] = (),
    sources_head: str = "",
    suffix: str = "",
    cited: Block = ("", []),
) -> list[Part]:
    """Convert the model's Markdown and split it into parts Telegram accepts, as one text
    (a long answer with its sources is split like any long answer). `quote` is plain text
    shown first as a quotation (what the bot heard in a voice message); `cited`, the dated
    quotes of the messages the answer cites (bot/citations.py), follow it, then `sources`,
    the answer's, as numbered links under `sources_head`; `suffix` (Markdown: the labels
    after an answer) comes last."""
    if sources or cited[0]:
        text, ents = _joined(_convert(markdown), cited)
        text, ents = _joined((text, ents), source_list(sources, sources_head))
        if suffix.strip():
            text, ents = _joined((text, ents), _convert(suffix.strip()))
    else:
        text, ents = _convert(markdown + suffix)
    if quote:
        head = quote + "\n\n"
        shift = _utf16_offsets(head)[-1]
        moved = [{**e, "offset": e["offset"] + shift} for e in ents]
        quoted = {"type": "blockquote", "offset": 0, "length": shift - 2}
        text, ents = head + text, [quoted, *moved]
    return split_message(text, ents, limit)


def _convert(markdown: str) -> tuple[str, list[dict[str, Any]]]:
    try:
        text, entities = telegramify_markdown.convert(markdown)
        ents = [e.to_dict() for e in entities]
    except Exception as exc:  # a converter bug must never cost the user the answer
        # The traceback may quote the text: at DEBUG only.
        log.error(
            "markdown conversion failed (%s); sending plain text",
            type(exc).__name__,
            exc_info=log.isEnabledFor(logging.DEBUG),
        )
        text, ents = markdown, []
    if not text.strip():
        text, ents = markdown, []
    return text, ents


def _joined(first: Block, second: Block) -> Block:
    """Two texts with their entities as one, a blank line apart (either may be empty)."""
    text, ents = first
    more, more_ents = second
    kept = text.rstrip()
    if not kept:
        return more, more_ents
    if not more.strip():
        return first
    end = utf16_len(kept)
    clipped = [
        {**e, "length": min(e["offset"] + e["length"], end) - e["offset"]}
        for e in ents
        if e["offset"] < end
    ]
    shift = end + 2
    moved = [{**e, "offset": e["offset"] + shift} for e in more_ents]
    return f"{kept}\n\n{more}", [*clipped, *moved]


# A character outside the Basic Multilingual Plane: two UTF-16 units (an emoji, mostly).
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _utf16_offsets(text: str) -> Sequence[int]:
    """The UTF-16 offset of each character of `text`, and its length last. Made of ranges
    (each stretch between two astral characters one), not character by character: a draft
    renders its whole answer so far, and a loop in Python over 1,500 characters took about
    0.2 ms a draft."""
    astral = [m.start() for m in _ASTRAL.finditer(text)]
    if not astral:
        return range(len(text) + 1)
    offsets: list[int] = []
    start = 0
    for before, at in enumerate(astral):  # `before` astral characters ahead of this stretch
        offsets.extend(range(start + before, at + 1 + before))
        start = at + 1
    offsets.extend(range(start + len(astral), len(text) + 1 + len(astral)))
    return offsets


def split_message(text: str, entities: list[dict[str, Any]], limit: int) -> list[Part]:
    """Split into parts of at most `limit` UTF-16 units.

    Cuts at the last paragraph break that fits, else a line break, else a space, else
    anywhere (never inside a surrogate pair). A cut never lands inside a code block when a
    break outside one fits. An entity that spans a cut is clipped into both parts, so a code
    block split in two is closed in the first part and reopened in the second.
    """
    offsets = _utf16_offsets(text)
    pre_ranges = [
        (e["offset"], e["offset"] + e["length"]) for e in entities if e["type"] in ("pre", "code")
    ]

    def in_code(pos: int) -> bool:
        u = offsets[pos]
        return any(start < u < end for start, end in pre_ranges)

    cuts: list[tuple[int, int]] = []
    start = 0
    n = len(text)
    while start < n:
        if offsets[n] - offsets[start] <= limit:
            cuts.append((start, n))
            break
        # Largest end index whose part fits (binary search over UTF-16 offsets).
        budget = offsets[start] + limit
        lo_idx, hi_idx = start, n
        while lo_idx < hi_idx:
            mid = (lo_idx + hi_idx + 1) // 2
            if offsets[mid] <= budget:
                lo_idx = mid
            else:
                hi_idx = mid - 1
        hi = lo_idx
        cut = _best_cut(text, start, hi, in_code)
        cuts.append((start, cut))
        start = cut
    parts: list[Part] = []
    for a, b in cuts:
        chunk = text[a:b]
        # Trailing and leading newlines at a cut carry nothing: drop them.
        stripped = chunk.rstrip("\n")
        lead = len(chunk) - len(chunk.lstrip("\n"))
        if not stripped.strip():
            continue
        ua2 = offsets[a + lead]
        ub2 = offsets[a + len(stripped)]
        part_ents = []
        for e in entities:
            s, t = max(e["offset"], ua2), min(e["offset"] + e["length"], ub2)
            if s < t:
                part_ents.append({**e, "offset": s - ua2, "length": t - s})
        parts.append(Part(text=chunk[lead : len(stripped)], entities=_within_limit(part_ents)))
    return parts


# Kept first when a part has more entities than Telegram applies: a link is content (a
# source's address), a code block is layout; bold or italics lost cost the least.
_KEPT_FIRST = frozenset({"text_link", "pre", "code"})


def _within_limit(entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most MAX_ENTITIES of a part's entities, in order: links and code before the rest."""
    if len(entities) <= MAX_ENTITIES:
        return entities
    first = [n for n, e in enumerate(entities) if e["type"] in _KEPT_FIRST]
    rest = [n for n, e in enumerate(entities) if e["type"] not in _KEPT_FIRST]
    kept = sorted((first + rest)[:MAX_ENTITIES])
    return [entities[n] for n in kept]


def _best_cut(text: str, start: int, hi: int, in_code: Any) -> int:
    """Index in (start, hi] to end a part at; hi is the furthest one that fits."""
    floor = start + max(1, (hi - start) // 3)  # avoid tiny parts when a better break exists
    window = text[start:hi]
    for sep, allow_code in (("\n\n", False), ("\n", False), ("\n", True), (" ", True)):
        pos = len(window)
        while True:
            pos = window.rfind(sep, 0, pos)
            if pos < 0:
                break
            cut = start + pos + len(sep)
            if cut <= floor:
                break
            if allow_code or not in_code(cut):
                return cut
    # No break fits: cut hard. Indices are characters, so a surrogate pair stays whole.
    return hi if hi > start else start + 1


def topic_of(message: Message) -> int | None:
    """The forum topic a message was written in: answers must go back to it, not to General."""
    return message.message_thread_id if message.is_topic_message else None


async def send_markdown(
    bot: Bot,
    chat_id: int,
    markdown: str,
    *,
    reply_to: int | None = None,
    thread_id: int | None = None,
    quote: str = "",
) -> None:
    """Send an answer as one or more messages, in order (`quote` first, see `render`).

    A part Telegram rejects with entities is re-sent as plain text; a flood-wait is waited
    out (bounded) and retried.
    """
    await send_parts(bot, chat_id, render(markdown, quote=quote), reply_to, thread_id)


async def send_plain(
    bot: Bot,
    chat_id: int,
    text: str,
    *,
    reply_to: int | None = None,
    thread_id: int | None = None,
) -> None:
    """Send text exactly as written (no Markdown), split like an answer when it is long."""
    await send_parts(bot, chat_id, split_message(text, [], TELEGRAM_LIMIT), reply_to, thread_id)


async def send_parts(
    bot: Bot,
    chat_id: int,
    parts: list[Part],
    reply_to: int | None,
    thread_id: int | None,
    *,
    skip: int = 0,
    accepted: Callable[[int], Awaitable[None]] | None = None,
    quote: str = "",
) -> None:
    """Send `parts` in order, but the first `skip` (sent already); `accepted(n)` after each
    one Telegram took, n counting from the first. The first replies to `reply_to` quoting
    `quote` (a part of that message's text), if given."""
    for index, part in enumerate(parts):
        if index < skip:
            continue
        # Only the first part replies to the user's message (it threads the answer in groups).
        reply = (
            ReplyParameters(
                message_id=reply_to, allow_sending_without_reply=True, quote=quote or None
            )
            if reply_to is not None and index == 0
            else None
        )
        await send_text(bot, chat_id, part.text, part.entities, thread_id=thread_id, reply=reply)
        if accepted is not None:
            await accepted(index + 1)
