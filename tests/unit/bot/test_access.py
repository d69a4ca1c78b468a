"""The allowlist (bot/middlewares.py AccessMiddleware), fed to the dispatcher: an outsider
gets one line in their Telegram app's language, for anything they send or press, and nothing
of theirs is read, asked or stored."""

from __future__ import annotations

from membot.bot import texts
from membot.ids import ConversationId
from tests.unit.bot.conftest import OpenDoor

FRIEND, OUTSIDER = 7501, 7502
GROUP = -7500
EN, RU = texts.EN, texts.get("ru")


async def test_an_outsider_is_refused_in_one_line_whatever_they_send(open_door: OpenDoor) -> None:
    door = await open_door(allowed_user_ids=str(FRIEND))
    for text in ("hello, who are you?", "/start", "/help", "/summary", "/reset"):
        assert await door.say(OUTSIDER, text) == [EN.NOT_ALLOWED]
    assert [m.text for m in await door.sent(OUTSIDER, door.tg.push_sticker(OUTSIDER))] == [
        EN.NOT_ALLOWED
    ]
    edited = await door.sent(OUTSIDER, door.tg.push_edit(OUTSIDER, "hello?"))
    assert [m.text for m in edited] == [EN.NOT_ALLOWED]
    assert "\n" not in EN.NOT_ALLOWED
    assert door.model.requests == []
    assert await door.repository.tail(ConversationId.telegram(OUTSIDER), 10) == []
    door.model.script("Hello, friend.")
    assert await door.say(FRIEND, "hello, who are you?") == ["Hello, friend."]


async def test_the_refusal_is_in_the_outsiders_language(open_door: OpenDoor) -> None:
    door = await open_door(allowed_user_ids=str(FRIEND))
    assert await door.say(OUTSIDER, "привет", language_code="ru") == [RU.NOT_ALLOWED]
    assert await door.say(OUTSIDER, "hallo", language_code="de-AT") == [EN.NOT_ALLOWED]
    assert await door.say(OUTSIDER, "hi", language_code="ru-RU") == [RU.NOT_ALLOWED]


async def test_an_outsider_in_a_group_is_refused_only_when_addressing_the_bot(
    open_door: OpenDoor,
) -> None:
    door = await open_door(allowed_user_ids=str(FRIEND))
    assert await door.say(GROUP, "chatting, not to the bot", user_id=OUTSIDER) == []
    assert await door.mention(GROUP, "when is the deploy?", user_id=OUTSIDER) == [EN.NOT_ALLOWED]
    assert await door.say(GROUP, "/reset", user_id=OUTSIDER) == [EN.NOT_ALLOWED]
    assert door.model.requests == []


async def test_an_outsider_pressing_a_button_gets_an_alert(open_door: OpenDoor) -> None:
    door = await open_door(allowed_user_ids=str(FRIEND), models="test/model,fast/small")
    await door.say(GROUP, "/model", user_id=FRIEND)
    keyboard = door.tg.messages_to(GROUP)[-1].message_id
    answer = await door.press(GROUP, keyboard, "model:1", user_id=OUTSIDER, language_code="ru")
    assert answer["text"] == RU.NOT_ALLOWED
    assert str(answer.get("show_alert")).lower() == "true"
    assert door.tg.edits == []  # the chat's model did not change
