"""The fake Bot API's ephemeral messages (Bot API 10.2) as aiogram sees them: sent to one
member of a group, invisible to the others, pressed and edited by their receiver only, and
refused where a test says Telegram would."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import TelegramBadRequest, TelegramForbiddenError
from aiogram.types import EphemeralMessageParameters, InlineKeyboardButton, InlineKeyboardMarkup

from tests.fakes import FakeTelegram

TOKEN = "4242:TEST-TOKEN"
GROUP = -9100
ANN, BOB = 911, 912
KEYBOARD = InlineKeyboardMarkup(
    inline_keyboard=[[InlineKeyboardButton(text="x", callback_data="x")]]
)


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as server:
        yield server


@pytest.fixture
async def bot(tg: FakeTelegram) -> AsyncIterator[Bot]:
    bot = Bot(TOKEN, session=AiohttpSession(api=TelegramAPIServer.from_base(tg.base_url)))
    yield bot
    await bot.session.close()


def to(user_id: int) -> EphemeralMessageParameters:
    return EphemeralMessageParameters(receiver_user_id=user_id)


async def test_an_ephemeral_message_is_its_receivers_alone(tg: FakeTelegram, bot: Bot) -> None:
    sent = await bot.send_message(
        GROUP, "for Ann", ephemeral_message_parameters=to(ANN), reply_markup=KEYBOARD
    )
    assert sent.message_id == 0 and sent.ephemeral_message_id == 1
    assert sent.receiver_user is not None and sent.receiver_user.id == ANN
    await bot.send_message(GROUP, "for all")
    assert [m.text for m in tg.seen_by(GROUP, ANN)] == ["for Ann", "for all"]
    assert [m.text for m in tg.seen_by(GROUP, BOB)] == ["for all"]
    with pytest.raises(ValueError):
        tg.press_ephemeral(GROUP, 1, "x", BOB)  # Bob does not see it
    with pytest.raises(ValueError):
        tg.push_callback(GROUP, 0, "x", user_id=ANN)  # not among the chat's messages
    tg.press_ephemeral(GROUP, 1, "x", ANN)
    assert await bot.edit_ephemeral_message_text(
        chat_id=GROUP, receiver_user_id=ANN, ephemeral_message_id=1, text="edited"
    )
    assert tg.ephemeral_message(GROUP, 1)["text"] == "edited"
    with pytest.raises(TelegramBadRequest):  # by its receiver only
        await bot.edit_ephemeral_message_text(
            chat_id=GROUP, receiver_user_id=BOB, ephemeral_message_id=1, text="no"
        )
    assert await bot.delete_ephemeral_message(
        chat_id=GROUP, receiver_user_id=ANN, ephemeral_message_id=1
    )
    with pytest.raises(KeyError):
        tg.ephemeral_message(GROUP, 1)


async def test_refusals(tg: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(TelegramBadRequest):  # groups only
        await bot.send_message(ANN, "hi", ephemeral_message_parameters=to(ANN))
    tg.refuse_ephemeral()
    with pytest.raises(TelegramBadRequest):
        await bot.send_message(GROUP, "for Ann", ephemeral_message_parameters=to(ANN))
    tg.allow_ephemeral()
    await bot.send_message(GROUP, "for Ann", ephemeral_message_parameters=to(ANN))
    tg.never_started(BOB)
    with pytest.raises(TelegramForbiddenError):
        await bot.send_message(BOB, "hi")
    await bot.send_message(ANN, "hi")
