"""/search (bot/handlers/chat_settings.py): whether the model may search the web in a chat, and
an answer's sources as the chat sees them, fed to the dispatcher."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from membot.bot import texts
from membot.llm.model import LLMResponse, Source, Usage
from tests.unit.bot.conftest import Door, OpenDoor

CHAT = 7201
GROUP = -7200
EN, RU = texts.EN, texts.RU
MUSEUM = Source("https://example.org/visit", "Opening hours – City Museum")
FAQ = Source("https://example.org/faq")


def searched(door: Door) -> list[bool]:
    return [r.options.web_search for r in door.model.chat_requests]


def links(entities: list[dict[str, Any]], text: str) -> list[tuple[str, str]]:
    raw = text.encode("utf-16-le")
    return [
        (raw[2 * e["offset"] : 2 * (e["offset"] + e["length"])].decode("utf-16-le"), e["url"])
        for e in entities
        if e["type"] == "text_link"
    ]


async def test_search_is_on_until_the_chat_turns_it_off(door: Door) -> None:
    door.model.script("one", "two", "three")
    assert await door.say(CHAT, "/search") == [EN.SEARCH_ON]
    await door.say(CHAT, "weather?")
    assert await door.say(CHAT, "/search off") == [EN.SEARCH_SET_OFF]
    assert await door.say(CHAT, "/search") == [EN.SEARCH_OFF]
    await door.say(CHAT, "weather now?")
    assert await door.say(CHAT, "/search ON") == [EN.SEARCH_SET_ON]
    await door.say(CHAT, "and now?")
    assert searched(door) == [True, False, True]
    assert await door.say(CHAT, "/search maybe") == [EN.SEARCH_USAGE]


async def test_reset_forgets_the_chats_choice(door: Door) -> None:
    await door.say(CHAT, "/search off")
    await door.say(CHAT, "/reset")
    assert await door.say(CHAT, "/search") == [EN.SEARCH_ON]


async def test_in_groups_only_administrators_turn_search_off(open_door: OpenDoor) -> None:
    door = await open_door(admin_user_ids="900")
    door.tg.set_admins(GROUP, [701])
    member = {"user_id": 555, "first_name": "Mel"}
    admin = {"user_id": 701, "first_name": "Ada"}
    assert await door.say(GROUP, "/search off", **member) == [EN.ADMINS_ONLY]
    assert await door.say(GROUP, "/search", **member) == [EN.SEARCH_ON]  # anyone may look
    assert await door.say(GROUP, "/search off", **admin) == [EN.SEARCH_SET_OFF]
    assert await door.say(GROUP, "/search on", user_id=900) == [EN.SEARCH_SET_ON]  # the operator


async def test_the_operators_off_is_not_overridden(open_door: OpenDoor) -> None:
    door = await open_door(web_search=False)
    door.model.script("answer")
    assert await door.say(CHAT, "/search") == [EN.SEARCH_BY_OPERATOR]
    assert await door.say(CHAT, "/search on") == [EN.SEARCH_BY_OPERATOR]
    await door.say(CHAT, "news?")
    assert searched(door) == [False]


async def test_an_answers_sources_are_links_under_it_in_the_chats_language(door: Door) -> None:
    await door.say(CHAT, "/language ru")
    assert await door.say(CHAT, "/search") == [RU.SEARCH_ON]
    answer = LLMResponse("Музей открыт с 10 до 18.", model="test/model", sources=(MUSEUM, FAQ))
    door.model.script(answer)
    [sent] = await door.sent(CHAT, door.tg.push_text(CHAT, "Когда открыт музей?"))
    assert sent.text == (
        f"Музей открыт с 10 до 18.\n\n{RU.SOURCES}\n1. {MUSEUM.title}\n2. example.org/faq"
    )
    assert links(sent.entities, sent.text) == [
        (MUSEUM.title, MUSEUM.url),
        ("example.org/faq", FAQ.url),
    ]


async def test_what_a_search_costs_counts_in_usage_and_the_budget(open_door: OpenDoor) -> None:
    """OpenRouter bills a search in the call's reported cost (here $0.02 for its results, on
    top of $0.0005 of tokens): /usage shows it, and it spends the budget."""
    door = await open_door(user_daily_budget="0.01")
    usage = Usage(prompt_tokens=900, completion_tokens=100, cost=Decimal("0.0205"))
    door.model.script(
        LLMResponse("Open 10 to 18.", model="test/model", usage=usage, sources=(MUSEUM,))
    )
    await door.say(CHAT, "When is the museum open?", user_id=CHAT)
    line = EN.USAGE_LINE.format(tokens=1000, prompt=900, completion=100, cached=0, cost="0.0205")
    assert await door.say(CHAT, "/usage", user_id=CHAT) == [
        EN.USAGE_YOURS.format(day=line, month=line)
    ]
    [refusal] = await door.say(CHAT, "And tomorrow?", user_id=CHAT)
    assert refusal.startswith(EN.OVER_DAILY.split("{wait}")[0])


async def test_tools_says_whether_the_chat_may_search_the_web(door: Door) -> None:
    [listing] = await door.say(CHAT, "/tools")
    assert texts.EN.TOOLS_WEB in listing
    await door.say(CHAT, "/search off")
    [listing] = await door.say(CHAT, "/tools")
    assert texts.EN.TOOLS_WEB_OFF in listing
