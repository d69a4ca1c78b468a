"""/start, /help, /reset, /language, /summary and /memory (bot/handlers/commands.py), fed to
the dispatcher: each answers in the chat's language and asks the model nothing."""

from __future__ import annotations

from membot.bot import texts
from membot.core.language import SUPPORTED, own_name
from membot.ids import ConversationId
from tests.unit.bot.conftest import Door, OpenDoor

CHAT = 7001
CID = ConversationId.telegram(CHAT)
EN, RU = texts.EN, texts.get("ru")
RUSSIAN = own_name("ru")


async def test_start_and_help_in_english(door: Door) -> None:
    assert await door.say(CHAT, "/start") == [EN.START]
    assert await door.say(CHAT, "/help") == [EN.HELP.format(rounds=3, max_rounds=10)]
    assert door.model.requests == []


async def test_start_and_help_in_the_chats_language(door: Door) -> None:
    assert await door.say(CHAT, "/language ru") == [RU.LANGUAGE_SET.format(name=RUSSIAN, code="ru")]
    assert await door.say(CHAT, "/start") == [RU.START]
    assert await door.say(CHAT, "/help") == [RU.HELP.format(rounds=3, max_rounds=10)]


async def test_help_counts_the_configured_rounds(open_door: OpenDoor) -> None:
    door = await open_door(consult_rounds=2, max_rounds=4)
    assert await door.say(CHAT, "/help") == [EN.HELP.format(rounds=2, max_rounds=4)]


async def test_language_shows_sets_and_refuses(door: Door) -> None:
    assert await door.say(CHAT, "/language") == [EN.LANGUAGE_UNKNOWN]
    assert await door.say(CHAT, "/language klingon please") == [
        EN.LANGUAGE_BAD_CODE.format(code="klingon please", supported=", ".join(SUPPORTED))
    ]
    assert await door.say(CHAT, "/language ru") == [RU.LANGUAGE_SET.format(name=RUSSIAN, code="ru")]
    assert await door.say(CHAT, "/language") == [RU.LANGUAGE_IS.format(name=RUSSIAN, code="ru")]


async def test_reset_forgets_the_chat_and_says_so_in_its_language(door: Door) -> None:
    door.model.script("Noted.")
    await door.say(CHAT, "/language ru")
    assert await door.say(CHAT, "remember the blue door") == ["Noted."]
    assert await door.say(CHAT, "/reset") == [RU.RESET_DONE]
    assert await door.repository.tail(CID, 10) == []
    assert await door.say(CHAT, "/start") == [EN.START]  # the language is detected anew


async def test_summary_before_and_after_there_is_one(door: Door) -> None:
    assert await door.say(CHAT, "/summary") == [EN.NO_SUMMARY.format(first=40, every=20, window=20)]
    door.model.script("Noted.")
    await door.say(CHAT, "the blue door")
    meta = await door.repository.get_meta(CID)
    await door.repository.save_summary(CID, "They talked about doors.", 0, 0, meta.generation)
    assert await door.say(CHAT, "/summary") == [
        EN.SUMMARY.format(summary="They talked about doors.")
    ]


async def test_memory_lists_the_kept_facts(door: Door) -> None:
    assert await door.say(CHAT, "/memory") == [EN.NO_FACTS]
    await door.repository.add_fact(CID, "Likes tea", 100)
    await door.repository.add_fact(CID, "Has a cat", 100)
    assert await door.say(CHAT, "/memory") == [EN.FACTS.format(facts="1. Likes tea\n2. Has a cat")]
