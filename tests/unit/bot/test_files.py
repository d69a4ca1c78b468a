"""Documents and voice messages (bot/handlers/files.py, bot/handlers/voice.py), fed to the
dispatcher: a text file read and answered, what cannot be used refused in one line before
anything is downloaded or asked, and a group's files only when addressed to the bot."""

from __future__ import annotations

from membot.bot import texts
from tests.unit.bot.conftest import Door

CHAT = 7701
GROUP = -7700
EN = texts.EN


async def test_a_text_file_is_read_and_answered(door: Door) -> None:
    door.model.script("The code is 4217.")
    update = door.tg.push_document(
        CHAT, b"the door code is 4217\n", file_name="notes.txt", mime_type="text/plain"
    )
    assert [m.text for m in await door.sent(CHAT, update)] == ["The code is 4217."]
    assert "the door code is 4217" in str(door.model.chat_requests[-1].messages)


async def test_a_file_it_cannot_read_is_refused_by_name(door: Door) -> None:
    update = door.tg.push_document(
        CHAT, b"PK\x03\x04" + bytes(64), file_name="photos.zip", mime_type="application/zip"
    )
    assert [m.text for m in await door.sent(CHAT, update)] == [
        EN.FILE_NAMED.format(name="photos.zip", reply=EN.FILE_UNSUPPORTED)
    ]
    assert door.model.requests == []


async def test_a_recording_too_long_is_refused_before_the_download(door: Door) -> None:
    update = door.tg.push_voice(CHAT, duration=601, data=b"OggS" + bytes(64))
    assert [m.text for m in await door.sent(CHAT, update)] == [EN.AUDIO_TOO_LONG.format(minutes=10)]
    assert door.tg.call_count("getFile") == 0
    assert door.model.requests == []


async def test_in_a_group_a_file_not_addressed_to_the_bot_is_ignored(door: Door) -> None:
    update = door.tg.push_document(
        GROUP, b"minutes of the meeting\n", file_name="minutes.txt", user_id=501
    )
    assert await door.sent(GROUP, update) == []
    assert door.tg.call_count("getFile") == 0
