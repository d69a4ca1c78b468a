"""Edited messages (bot/handlers/edits.py), fed to the dispatcher: an edit of a text is a
new turn that says it is an edit; an edited command is not run again; in a group an edit is
answered only when addressed to the bot."""

from __future__ import annotations

from membot.bot.handlers.edits import EDIT_NOTE
from tests.fakes import BOT_USERNAME, utf16_len
from tests.unit.bot.conftest import Door

CHAT = 7401
GROUP = -7400
BOB = {"user_id": 701, "first_name": "Bob"}
MENTION = [{"type": "mention", "offset": 0, "length": utf16_len(f"@{BOT_USERNAME}")}]


async def test_an_edited_message_is_answered_as_an_edit(door: Door) -> None:
    door.model.script("A table for 5.", "A table for 6, then.")
    await door.say(CHAT, "book a table for 5 people")
    sent = await door.sent(CHAT, door.tg.push_edit(CHAT, "book a table for 6 people"))
    assert [m.text for m in sent] == ["A table for 6, then."]
    edit = EDIT_NOTE.format(text="book a table for 6 people")
    assert door.model.chat_requests[-1].user_texts == ["book a table for 5 people", edit]


async def test_an_edited_command_is_not_run_again(door: Door) -> None:
    await door.say(CHAT, "/help")
    assert await door.sent(CHAT, door.tg.push_edit(CHAT, "/reset")) == []
    assert door.model.requests == []


async def test_in_a_group_an_edit_is_answered_only_when_addressed(door: Door) -> None:
    assert await door.say(GROUP, "lunch at noon?", **BOB) == []
    assert await door.sent(GROUP, door.tg.push_edit(GROUP, "lunch at one?")) == []
    door.model.script("One works.")
    edited = door.tg.push_edit(GROUP, f"@{BOT_USERNAME} lunch at one?", entities=MENTION)
    assert [m.text for m in await door.sent(GROUP, edited)] == ["One works."]
    assert door.model.chat_requests[-1].user_texts == [
        "Bob: " + EDIT_NOTE.format(text="lunch at one?")
    ]
