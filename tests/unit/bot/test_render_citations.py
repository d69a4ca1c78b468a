"""The messages an answer cites, as Telegram shows them under it: a bold heading, then a
quotation each (author, a date_time entity, the cited part), before the sources and labels;
offsets in UTF-16 units whatever the text holds; kept in the Delivery for a resend."""

from __future__ import annotations

from datetime import UTC, datetime

from membot.bot.citations import AUTHOR_CHARS, cited_list, utf16_len
from membot.bot.render import render
from membot.memory.contract.citation import Citation
from membot.memory.contract.delivery import Delivery
from membot.memory.contract.models import Source

MARCH = datetime(2025, 3, 3, 23, 30, tzinfo=UTC)


def spans(text: str, entities: list[dict[str, object]], kind: str) -> list[str]:
    raw = text.encode("utf-16-le")
    return [
        raw[2 * int(e["offset"]) : 2 * (int(e["offset"]) + int(e["length"]))].decode("utf-16-le")  # type: ignore[call-overload]
        for e in entities
        if e["type"] == kind
    ]


def test_each_citation_is_a_dated_quotation_under_a_heading() -> None:
    citations = [
        Citation(1, MARCH, "Аня 🌷", "Лечу в Лиссабон\n3 мая 🛫", "user", 10),
        Citation(2, MARCH, "assistant", "Noted!", "assistant"),
    ]
    text, ents = cited_list(citations, "From this chat:", "My answer")
    assert text == (
        "From this chat:\n"
        "Аня 🌷, 2025-03-03: “Лечу в Лиссабон 3 мая 🛫”\n"
        "My answer, 2025-03-03: “Noted!”"
    )
    assert spans(text, ents, "bold") == ["From this chat:"]
    assert spans(text, ents, "blockquote") == text.split("\n")[1:]
    assert spans(text, ents, "date_time") == ["2025-03-03", "2025-03-03"]
    assert {e.get("unix_time") for e in ents if e["type"] == "date_time"} == {
        int(MARCH.timestamp())
    }
    assert all(int(e["offset"]) + int(e["length"]) <= utf16_len(text) for e in ents)  # type: ignore[call-overload]


def test_a_long_author_is_cut_and_the_list_goes_between_answer_and_sources() -> None:
    long = Citation(3, MARCH, "A" * 200, "hi", "user")
    text, _ = cited_list([long])
    assert text.startswith("A" * AUTHOR_CHARS + ", 2025")
    [part] = render(
        "**The answer**",
        cited=cited_list([long], "From this chat:"),
        sources=[Source("https://example.org", "Example")],
        sources_head="Sources:",
        suffix="\n\n_Stopped._",
    )
    assert part.text.split("\n\n") == [
        "The answer",
        f"From this chat:\n{'A' * AUTHOR_CHARS}, 2025-03-03: “hi”",
        "Sources:\n1. Example",
        "Stopped.",
    ]


def test_the_delivery_keeps_how_citations_are_shown() -> None:
    delivery = Delivery(
        reply_to=5, reply_quote="3 мая", cited_head="Из этого чата:", cited_self="Мой ответ"
    )
    assert Delivery.from_dict(delivery.to_dict()) == delivery
    assert Delivery.from_dict(Delivery().to_dict()) == Delivery()
