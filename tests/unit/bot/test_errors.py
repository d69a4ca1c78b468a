"""The error handler (bot/handlers/errors.py), fed to the dispatcher: an update whose
handling fails unexpectedly gets a short apology in the chat's language, and the failure
goes no further than the log."""

from __future__ import annotations

import logging

import pytest

from membot.bot import texts
from membot.errors import StorageUnavailable
from membot.intake.contract import transient
from tests.unit.bot.conftest import Door, OpenDoor

CHAT = 7601
EN, RU = texts.EN, texts.get("ru")


async def test_telegram_refusing_the_answer_gets_an_apology(door: Door) -> None:
    door.tg.fail_next("sendMessage", 400, "Bad Request: message to be replied not found")
    door.model.script("This answer will bounce.")
    assert await door.say(CHAT, "hello") == [EN.INTERNAL_ERROR]
    assert await door.say(CHAT, "/start") == [EN.START]  # the next update is answered


async def test_a_failure_no_one_expected_is_apologised_for_in_the_chats_language(
    door: Door, caplog: pytest.LogCaptureFixture
) -> None:
    await door.say(CHAT, "/language ru")
    door.model.script(RuntimeError("a bug, quoting the secret word"))
    with caplog.at_level(logging.INFO):
        assert await door.say(CHAT, "the secret word") == [RU.INTERNAL_ERROR]
    [failed] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "RuntimeError" in failed.getMessage()
    assert "secret" not in caplog.text and failed.exc_info is None  # no text, no traceback


async def test_a_failure_that_passes_is_raised_to_the_feeder_without_an_apology(
    open_door: OpenDoor,
) -> None:
    # As the stream's workers feed updates: the update stays in the stream, to be answered
    # once the server is back, so the chat hears nothing now.
    door = await open_door(passing=transient)
    door.model.script(StorageUnavailable("Redis did not answer"))
    update = door.tg.push_text(CHAT, "hello")
    with pytest.raises(StorageUnavailable):
        await door.feed(update)
    assert door.tg.messages_to(CHAT) == []
