"""An answer's sources under it in Telegram (bot/render.py, bot/citations.py): numbered lines
whose titles link to the pages, between the answer and its labels, split with a long answer
within Telegram's limits."""

from __future__ import annotations

from typing import Any

from membot.bot.render import TELEGRAM_LIMIT, Part, render
from membot.memory.contract.models import Source
from tests.fakes import utf16_len
from tests.fakes.telegram import validate_entities

MUSEUM = Source("https://example.org/visit", "Opening hours and tickets – City Museum 🏛")
NEWS = Source("https://example.org/news/thursdays?x=(1)", "City Museum extends [Thursday] hours")
UNTITLED = Source("https://example.org/faq/")


def entity_text(part: Part, entity: dict[str, Any]) -> str:
    raw = part.text.encode("utf-16-le")
    start, end = 2 * entity["offset"], 2 * (entity["offset"] + entity["length"])
    return raw[start:end].decode("utf-16-le")


def links(parts: list[Part]) -> list[tuple[str, str]]:
    """(link text, url) of every text link, in order."""
    return [
        (entity_text(part, e), e["url"])
        for part in parts
        for e in part.entities
        if e["type"] == "text_link"
    ]


def valid(parts: list[Part]) -> None:
    for part in parts:
        assert part.text.strip() and utf16_len(part.text) <= TELEGRAM_LIMIT
        validate_entities(part.text, part.entities)


def test_the_sources_follow_the_answer_as_numbered_links_titled() -> None:
    parts = render(
        "The museum is **open** 10 to 18.",
        sources=(MUSEUM, NEWS, UNTITLED),
        sources_head="Sources:",
    )
    [part] = parts
    valid(parts)
    assert part.text == (
        "The museum is open 10 to 18.\n\n"
        "Sources:\n"
        f"1. {MUSEUM.title}\n"
        f"2. {NEWS.title}\n"
        "3. example.org/faq"
    )
    assert links(parts) == [
        (MUSEUM.title, MUSEUM.url),
        (NEWS.title, NEWS.url),
        ("example.org/faq", UNTITLED.url),
    ]
    types = {(e["type"], entity_text(part, e)) for e in part.entities}
    assert ("bold", "open") in types and ("bold", "Sources:") in types


def test_the_labels_come_after_the_sources_and_a_quote_before_the_answer() -> None:
    parts = render(
        "Here is the plan.",
        quote="what was heard",
        sources=(MUSEUM,),
        sources_head="Источники:",
        suffix="\n\n_Round 1 of 3_",
    )
    [part] = parts
    valid(parts)
    assert part.text == (
        f"what was heard\n\nHere is the plan.\n\nИсточники:\n1. {MUSEUM.title}\n\nRound 1 of 3"
    )
    kinds = {e["type"]: entity_text(part, e) for e in part.entities}
    assert kinds["blockquote"] == "what was heard"
    assert kinds["italic"] == "Round 1 of 3"
    assert links(parts) == [(MUSEUM.title, MUSEUM.url)]


def test_a_long_answer_with_sources_splits_with_every_link_whole() -> None:
    # Two paragraphs fill a message: the list cannot join the last two, so it comes alone.
    paragraphs = [f"Paragraph {i}: " + "word " * 397 for i in range(8)]
    sources = tuple(Source(f"https://example.org/{n}", f"Page number {n} 🔎") for n in range(12))
    parts = render("\n\n".join(paragraphs), sources=sources, sources_head="Sources:")
    valid(parts)
    answer = [p.rstrip() for p in paragraphs]
    listed = "Sources:\n" + "\n".join(f"{n + 1}. Page number {n} 🔎" for n in range(12))
    assert [p.text for p in parts] == [
        *("\n\n".join(answer[i : i + 2]) for i in range(0, 8, 2)),
        listed,
    ]
    assert links(parts) == [(s.title, s.url) for s in sources]
    assert not links(parts[:4])


def test_a_list_longer_than_a_message_is_split_between_its_lines() -> None:
    sources = tuple(Source(f"https://example.org/{n}", f"{n} " + "t" * 95) for n in range(60))
    parts = render("Short answer.", sources=sources, sources_head="Sources:")
    valid(parts)
    assert len(parts) == 2
    assert all(p.text.split("\n")[-1].startswith(tuple("0123456789")) for p in parts)
    assert [url for _, url in links(parts)] == [s.url for s in sources]


def test_a_long_title_is_cut_and_an_address_that_is_no_web_page_is_not_linked() -> None:
    long = Source("https://example.org/long", "A very long title " * 20)
    odd = Source("javascript:alert(1)", "Not a page")
    [part] = render("Answer.", sources=(long, odd))
    [(text, url)] = links([part])
    assert url == long.url and len(text) == 100 and text.endswith("…")
    assert part.text.endswith("2. Not a page")


def test_an_address_telegram_would_refuse_as_a_link_is_shown_not_linked() -> None:
    good = Source("https://example.org/a", "Good")
    spaced = Source("https://a b/c", "Spaced")
    hostless = Source("https:///path", "No host")
    [part] = render("Answer.", sources=(good, spaced, hostless))
    assert links([part]) == [("Good", good.url)]
    assert part.text.endswith("2. Spaced\n3. No host")


def test_without_sources_an_answer_renders_as_before() -> None:
    assert render("Answer.", suffix="\n\n_Stopped._") == render("Answer.\n\n_Stopped._")
    assert render("", sources=(MUSEUM,), sources_head="Sources:")[0].text.startswith("Sources:")


def test_an_answer_rich_in_formatting_keeps_every_source_link() -> None:
    # Telegram applies 100 entities a message: 120 bold words and five sources in one part.
    answer = " ".join(f"**w{n}**" for n in range(120))
    pages = [Source(f"https://example.org/{n}", f"Page {n}") for n in range(5)]
    parts = render(answer, sources=pages, sources_head="Sources:")
    [part] = parts
    valid(parts)
    assert len(part.entities) == 100
    assert links(parts) == [(f"Page {n}", f"https://example.org/{n}") for n in range(5)]
