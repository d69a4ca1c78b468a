"""Routers of commands only: skipped whole by a message that is no command."""

from __future__ import annotations

import datetime

import pytest
from aiogram import Router
from aiogram.filters import Command
from aiogram.types import Chat, Message

from membot.bot.filters import Commanded, commands_only
from membot.bot.handlers import build_routers


def message(text: str | None = None, caption: str | None = None) -> Message:
    return Message(
        message_id=1,
        date=datetime.datetime.now(datetime.UTC),
        chat=Chat(id=5, type="private"),
        text=text,
        caption=caption,
    )


async def test_what_may_be_a_command_is_what_the_command_filter_reads() -> None:
    commanded = Commanded()
    assert await commanded(message("/help"))
    assert await commanded(message("  /start payload"))  # Command skips leading blanks too
    assert await commanded(message(caption="/import"))  # a file's caption, as Command reads
    assert not await commanded(message("help me with /help"))
    assert not await commanded(message("hello"))
    assert not await commanded(message(caption="a photo"))
    assert not await commanded(message())


async def handler(message: Message) -> None:
    return None


def test_a_router_that_answers_more_than_commands_is_refused() -> None:
    router = Router(name="mixed")
    router.message.register(handler, Command("help"))
    router.message.register(handler)  # a plain message too: it must not be skipped
    with pytest.raises(ValueError, match="mixed"):
        commands_only(router)


def test_the_bots_routers_are_built() -> None:
    assert len(build_routers()) > 10  # every commands_only router passed its check
