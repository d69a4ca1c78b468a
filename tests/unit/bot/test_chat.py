"""Text messages (bot/handlers/chat.py) and what the bot does not read
(bot/handlers/other.py), fed to the dispatcher: a private message answered, a group's only
when addressed to the bot, a model that fails heard as a short apology."""

from __future__ import annotations

import pytest

from membot.bot import texts
from membot.ids import ConversationId
from membot.llm.errors import LLMError, LLMRateLimited, LLMTimeout, LLMUnavailable
from tests.unit.bot.conftest import Door, OpenDoor

CHAT = 7301
GROUP = -7300
EN, RU = texts.EN, texts.get("ru")


async def test_a_message_is_answered_and_remembered(door: Door) -> None:
    door.model.script("Hi, Alice.", "You said hello.")
    assert await door.say(CHAT, "hello") == ["Hi, Alice."]
    assert await door.say(CHAT, "what did I say?") == ["You said hello."]
    assert door.model.chat_requests[-1].user_texts == ["hello", "what did I say?"]
    stored = await door.repository.tail(ConversationId.telegram(CHAT), 10)
    assert [m.content for m in stored] == [
        "hello",
        "Hi, Alice.",
        "what did I say?",
        "You said hello.",
    ]


async def test_in_a_group_only_what_is_addressed_to_the_bot_is_answered(door: Door) -> None:
    assert await door.say(GROUP, "chatting among ourselves", user_id=501) == []
    assert await door.say(GROUP, "@someone_else look", user_id=501) == []
    door.model.script("It is noon.", "You are welcome.")
    assert await door.mention(GROUP, "what time is it?", user_id=501) == ["It is noon."]
    # The model reads what was said, without the mention.
    assert door.model.chat_requests[-1].user_texts[-1].endswith("what time is it?")
    assert "@" not in door.model.chat_requests[-1].user_texts[-1]
    bot_message = door.tg.messages_to(GROUP)[-1].message_id
    assert await door.say(GROUP, "thanks", user_id=501, reply_to=bot_message) == [
        "You are welcome."
    ]
    assert len(door.model.requests) == 2


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (LLMUnavailable("down"), EN.LLM_FAILED),
        (LLMTimeout("slow"), EN.LLM_FAILED),
        (LLMRateLimited("busy"), EN.LLM_BUSY),
    ],
    ids=["unavailable", "timeout", "rate-limited"],
)
async def test_a_model_failure_is_a_short_apology_and_stores_nothing(
    door: Door, failure: LLMError, expected: str
) -> None:
    door.model.script(failure)
    assert await door.say(CHAT, "this one fails") == [expected]
    assert await door.repository.tail(ConversationId.telegram(CHAT), 10) == []


async def test_a_model_failure_is_apologised_for_in_the_chats_language(door: Door) -> None:
    await door.say(CHAT, "/language ru")
    door.model.script(LLMUnavailable("down"))
    assert await door.say(CHAT, "привет") == [RU.LLM_FAILED]


async def test_what_the_bot_does_not_read_gets_a_polite_refusal(door: Door) -> None:
    sent = await door.sent(CHAT, door.tg.push_sticker(CHAT))
    assert [m.text for m in sent] == [EN.TEXT_ONLY]
    await door.say(CHAT, "/language ru")
    sent = await door.sent(CHAT, door.tg.push_sticker(CHAT))
    assert [m.text for m in sent] == [RU.TEXT_ONLY]
    assert door.model.requests == []


async def test_service_messages_get_no_answer(door: Door) -> None:
    await door.say(CHAT, "/start")
    pinned = door.tg.messages_to(CHAT)[-1].message_id
    assert await door.sent(CHAT, door.tg.push_pinned(CHAT, pinned)) == []


async def test_a_sticker_in_a_group_not_addressed_to_the_bot_is_ignored(door: Door) -> None:
    assert await door.sent(GROUP, door.tg.push_sticker(GROUP, user_id=501)) == []


async def test_a_user_over_their_budget_is_told_when_it_resets(open_door: OpenDoor) -> None:
    door = await open_door(user_daily_budget="0")
    [refusal] = await door.say(CHAT, "one more question")
    assert refusal.startswith(EN.OVER_DAILY.split("{wait}")[0])
    assert door.model.requests == []
    assert await door.say(CHAT, "/help") == [EN.HELP.format(rounds=3, max_rounds=10)]
