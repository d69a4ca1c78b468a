"""membot's Bot API session (bot/session.py): a request without a file as one JSON body, and
what Telegram reads from it the same as from aiogram's own form."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiogram import Bot
from aiogram.client.default import DefaultBotProperties
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.methods import SendMessage
from aiogram.types import (
    BufferedInputFile,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    MessageEntity,
    ReplyParameters,
)

from membot.bot.session import JsonBody, JsonSession
from tests.conftest import TOKEN
from tests.fakes import FakeTelegram

CHAT = 7301
TEXT = "Plan: squats 🏋️, presses and rows — then rest."


def make(tg: FakeTelegram, session: AiohttpSession) -> Bot:
    return Bot(
        token=TOKEN,
        session=session,
        default=DefaultBotProperties(link_preview=LinkPreviewOptions(is_disabled=True)),
    )


@pytest.fixture
async def bots(tg: FakeTelegram) -> AsyncIterator[tuple[Bot, Bot]]:
    api = TelegramAPIServer.from_base(tg.base_url)
    form = make(tg, AiohttpSession(api=api))
    json = make(tg, JsonSession(api=api, json_loads=orjson.loads))
    yield form, json
    for bot in (form, json):
        await bot.session.close()


async def send(bot: Bot) -> None:
    reply = await bot.send_message(CHAT, "the question")
    await bot.send_message(
        CHAT,
        TEXT,
        entities=[MessageEntity(type="bold", offset=0, length=4)],
        parse_mode=None,
        reply_parameters=ReplyParameters(message_id=reply.message_id),
        reply_markup=InlineKeyboardMarkup(
            inline_keyboard=[[InlineKeyboardButton(text="Forget", callback_data="f:1")]]
        ),
        disable_notification=False,
        message_thread_id=None,
    )
    await bot.send_chat_action(CHAT, "typing")


def as_read(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters as Telegram reads them: a number or a boolean the same whether it came as
    JSON or as a form's text."""
    return {k: v if isinstance(v, dict | list) else str(v).lower() for k, v in params.items()}


async def test_telegram_reads_the_same_from_the_json_body_as_from_the_form(
    tg: FakeTelegram, bots: tuple[Bot, Bot]
) -> None:
    form, json = bots
    session = json.session
    assert isinstance(session, JsonSession)
    body = session.build_form_data(json, SendMessage(chat_id=CHAT, text=TEXT))
    assert isinstance(body, JsonBody)  # one JSON body, not a form
    await send(form)
    await send(json)
    first, second = tg.messages_to(CHAT)[1], tg.messages_to(CHAT)[3]
    assert (second.text, second.entities) == (first.text, first.entities) == (TEXT, first.entities)
    reply_to = second.params.pop("reply_parameters")["message_id"]
    assert reply_to == tg.messages_to(CHAT)[2].message_id
    first.params.pop("reply_parameters")
    assert as_read(second.params) == as_read(first.params)
    assert second.params["link_preview_options"] == {"is_disabled": True}  # the bot's default
    assert "message_thread_id" not in second.params  # None: left out, as from a form
    assert as_read(tg.action_params[1]) == as_read(tg.action_params[0])


async def test_a_request_with_a_file_is_still_a_multipart_form(
    tg: FakeTelegram, bots: tuple[Bot, Bot]
) -> None:
    _, json = bots
    await json.send_document(CHAT, BufferedInputFile(b'{"a": 1}', "export.json"), caption="x")
    [document] = tg.documents_to(CHAT)
    assert (document.data, document.file_name, document.caption) == (
        b'{"a": 1}',
        "export.json",
        "x",
    )
