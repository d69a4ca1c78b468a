"""/forget and its buttons (bot/handlers/forget.py, bot/forgetting.py), fed to the dispatcher
over the in-memory backend: the listing with dates, Keep, an old or foreign button, the
usage line, the memory screen's button, and the words in Russian."""

from __future__ import annotations

from membot.bot.texts import forget as forget_texts
from membot.ids import ConversationId
from tests.fakes import SentMessage
from tests.unit.bot.conftest import Door

CHAT = 7701
EN, RU = forget_texts.EN, forget_texts.RU
CID = ConversationId.telegram(CHAT)
GROUP = -7700
GROUP_CID = ConversationId.telegram(GROUP)


def dates(message: SentMessage) -> int:
    return sum(e["type"] == "date_time" for e in message.entities)


async def test_the_listing_shows_each_match_with_its_date_and_keep_keeps_it(door: Door) -> None:
    door.model.script("Noted.", "Fine.")
    await door.say(CHAT, "my pin is 0451")
    await door.say(CHAT, "the weather is nice")
    [listing] = await door.sent(CHAT, door.tg.push_text(CHAT, "/forget 0451"))
    assert listing.text.startswith(EN.FOUND.format(messages=1, facts=0))
    assert "my pin is 0451" in listing.text and "weather" not in listing.text
    assert dates(listing) == 1
    markup = listing.params["reply_markup"]["inline_keyboard"]
    [(yes, yes_data), (no, no_data)] = [(b["text"], b["callback_data"]) for b in markup[0]]
    assert (yes, no) == (EN.BUTTON_YES, EN.BUTTON_NO)
    await door.press(CHAT, listing.message_id, no_data)
    assert door.tg.edits[-1]["text"] == EN.CANCELLED
    assert "0451" in (await door.core.repository.tail(CID, 4))[0].content
    # The request is gone with Keep: its other button is expired now.
    answer = await door.press(CHAT, listing.message_id, yes_data)
    assert answer["text"] == EN.EXPIRED


async def test_no_words_no_match_and_a_made_up_button(door: Door) -> None:
    assert await door.say(CHAT, "/forget") == [EN.USAGE]
    assert await door.say(CHAT, "/forget nothing-here") == [EN.NONE]
    door.model.script("Hi.")
    [answer] = await door.say(CHAT, "hello")
    message_id = door.tg.messages_to(CHAT)[-1].message_id
    pressed = await door.press(CHAT, message_id, "forget:0123456789abcdef:1")
    assert pressed["text"] == EN.EXPIRED
    assert answer == "Hi."


async def test_the_memory_screens_button_and_russian_words(door: Door) -> None:
    door.model.script("Привет.")
    await door.say(CHAT, "Привет, меня зовут Анна и я живу в Порту")
    message_id = door.tg.messages_to(CHAT)[-1].message_id
    await door.press(CHAT, message_id, "memory:forget")
    assert door.tg.messages_to(CHAT)[-1].text == RU.HOW
    [listing] = await door.sent(CHAT, door.tg.push_text(CHAT, "/forget Порту"))
    assert listing.text.startswith(RU.FOUND.format(messages=1, facts=0))


async def test_in_a_group_only_the_one_who_asked_confirms(door: Door) -> None:
    ann, bob = {"user_id": 601, "first_name": "Ann"}, {"user_id": 602, "first_name": "Bob"}
    door.model.script("Noted.")
    await door.mention(GROUP, "my pin is 0451", **ann)
    [listing] = await door.sent(GROUP, door.tg.push_text(GROUP, "/forget 0451", **ann))
    assert listing.receiver_user_id == 601  # Ann's alone
    yes = listing.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
    # A press of Bob's with that button's data (he cannot see it): refused, nothing erased.
    shown = next(m for m in reversed(door.tg.messages_to(GROUP)) if m.message_id)
    answer = await door.press(GROUP, shown.message_id, yes, **bob)
    assert (answer["text"], str(answer.get("show_alert")).lower()) == (EN.NOT_YOURS, "true")
    assert "0451" in (await door.core.repository.tail(GROUP_CID, 2))[0].content
