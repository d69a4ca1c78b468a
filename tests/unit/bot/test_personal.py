"""bot/personal.py: where an answer for one member goes, and in which order the ways are
tried: ephemeral in the group, else a private message, else the group (the answer, or the
note that stands for it). A real aiogram Bot talks to the fake Bot API over HTTP."""

from __future__ import annotations

import pytest
from aiogram import Bot
from aiogram.exceptions import TelegramBadRequest
from aiogram.types import Chat, InlineKeyboardButton, InlineKeyboardMarkup, Message
from aiogram.utils.formatting import Bold, Text

from membot.bot.personal import Audience, Piece, Route, edit_personal, send_personal
from tests.fakes import FakeTelegram

GROUP = -7400
ANN = 741
BOB = 742
HEADER = "From the group “Readers”:"
NOTE = "Open a private chat with me."
KEYBOARD = InlineKeyboardMarkup(
    inline_keyboard=[[InlineKeyboardButton(text="Delete 1", callback_data="x:1")]]
)


def group(user_id: int | None = ANN, **more: object) -> Audience:
    chat = Chat(id=GROUP, type="supergroup", title="Readers")
    return Audience(chat=chat, user_id=user_id, **more)  # type: ignore[arg-type]


async def send(bot: Bot, to: Audience, content: object, **options: object) -> Route:
    return await send_personal(bot, to, content, header=HEADER, **options)  # type: ignore[arg-type]


async def test_first_an_ephemeral_message_to_the_member(tg: FakeTelegram, bot: Bot) -> None:
    to = group(callback_query_id="cbq-7")
    assert await send(bot, to, "Your usage", markup=KEYBOARD, public=NOTE) == Route.EPHEMERAL
    [sent] = tg.messages_to(GROUP)
    assert (sent.receiver_user_id, sent.text) == (ANN, "Your usage")
    assert sent.params["ephemeral_message_parameters"]["callback_query_id"] == "cbq-7"
    assert sent.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"] == "x:1"
    assert tg.seen_by(GROUP, BOB) == [] and tg.seen_by(GROUP, ANN) == [sent]


async def test_then_a_private_message_headed_by_the_group_without_buttons(
    tg: FakeTelegram, bot: Bot
) -> None:
    tg.refuse_ephemeral()
    content = Text("Facts: ", Bold("tea"))
    assert await send(bot, group(), content, markup=KEYBOARD, public=NOTE) == Route.PRIVATE
    assert tg.messages_to(GROUP) == []
    [sent] = tg.messages_to(ANN)
    assert sent.text == f"{HEADER}\n\nFacts: tea"
    [bold] = sent.entities  # moved past the header
    assert sent.text[bold["offset"] : bold["offset"] + bold["length"]] == "tea"
    assert "reply_markup" not in sent.params


async def test_last_the_group_itself_or_the_note_that_stands_for_the_answer(
    tg: FakeTelegram, bot: Bot
) -> None:
    tg.refuse_ephemeral(403, "Forbidden: not allowed")
    tg.never_started(ANN)
    tg.push_text(GROUP, "/memory", user_id=ANN)  # the group's first message: id 1
    to = group(reply_to=1)
    assert await send(bot, to, "Ann's facts", public=NOTE) == Route.NOTE
    assert await send(bot, to, "Your usage", markup=KEYBOARD) == Route.CHAT
    note, usage = tg.messages_to(GROUP)
    assert (note.text, note.reply_to_message_id, note.receiver_user_id) == (NOTE, 1, None)
    assert usage.text == "Your usage" and "reply_markup" in usage.params
    assert tg.messages_to(ANN) == []


async def test_no_member_to_write_to_means_the_group(tg: FakeTelegram, bot: Bot) -> None:
    """An anonymous administrator (or a channel) writes as the group: nobody to address."""
    assert await send(bot, group(user_id=None), "Your usage") == Route.CHAT
    assert await send(bot, group(user_id=None), "Facts", public=NOTE) == Route.NOTE
    assert [m.receiver_user_id for m in tg.messages_to(GROUP)] == [None, None]
    assert tg.call_count("sendMessage") == 2  # nothing was tried first


async def test_in_a_private_chat_an_ordinary_message(tg: FakeTelegram, bot: Bot) -> None:
    to = Audience(chat=Chat(id=ANN, type="private"), user_id=ANN)
    assert await send(bot, to, "Your usage", markup=KEYBOARD, public=NOTE) == Route.CHAT
    [sent] = tg.messages_to(ANN)
    assert sent.receiver_user_id is None and sent.text == "Your usage"
    assert "reply_markup" in sent.params


async def test_a_long_answer_is_split_with_the_buttons_under_its_last_part(
    tg: FakeTelegram, bot: Bot
) -> None:
    text = "\n".join(f"{n}. " + "word " * 30 for n in range(1, 60))
    assert await send(bot, group(), text, markup=KEYBOARD) == Route.EPHEMERAL
    parts = tg.messages_to(GROUP)
    assert len(parts) > 1 and all(p.receiver_user_id == ANN for p in parts)
    assert ["reply_markup" in p.params for p in parts] == [False] * (len(parts) - 1) + [True]
    assert "\n".join(p.text for p in parts) == text


async def test_formatting_refused_is_sent_plain_to_the_member_alone(
    tg: FakeTelegram, bot: Bot
) -> None:
    tg.reject_entities_when(lambda params: True)
    assert await send(bot, group(), Text("a ", Bold("b"))) == Route.EPHEMERAL
    [sent] = tg.messages_to(GROUP)
    assert (sent.text, sent.entities, sent.receiver_user_id) == ("a b", [], ANN)


async def test_a_refusal_after_the_first_part_is_an_error_not_a_second_copy(
    tg: FakeTelegram, bot: Bot
) -> None:
    tg.fail_next("sendMessage", 400, "Bad Request: something else", chat_id=GROUP, after=1)
    pieces = [Piece("one"), Piece("two")]
    with pytest.raises(TelegramBadRequest):
        await send(bot, group(), pieces)
    assert [m.text for m in tg.messages_to(GROUP)] == ["one"]
    assert tg.messages_to(ANN) == []


async def test_an_ephemeral_message_is_edited_as_one(tg: FakeTelegram, bot: Bot) -> None:
    await send(bot, group(), "2 facts", markup=KEYBOARD)
    [sent] = tg.messages_to(GROUP)
    assert sent.ephemeral_message_id is not None
    shown = tg.ephemeral_message(GROUP, sent.ephemeral_message_id)
    message = Message.model_validate(shown, context={"bot": bot})
    assert await edit_personal(bot, message, "1 fact")
    assert tg.ephemeral_message(GROUP, sent.ephemeral_message_id)["text"] == "1 fact"
    assert "reply_markup" not in tg.ephemeral_message(GROUP, sent.ephemeral_message_id)
    assert not await edit_personal(bot, message, "1 fact")  # not modified: said, not raised
    assert tg.call_count("editMessageText") == 0


async def test_an_ephemeral_message_that_names_no_receiver_is_edited_for_its_presser(
    tg: FakeTelegram, bot: Bot
) -> None:
    await send(bot, group(), "2 facts", markup=KEYBOARD)
    [sent] = tg.messages_to(GROUP)
    assert sent.ephemeral_message_id is not None
    shown = dict(tg.ephemeral_message(GROUP, sent.ephemeral_message_id))
    del shown["receiver_user"]
    message = Message.model_validate(shown, context={"bot": bot})
    assert await edit_personal(bot, message, "1 fact", presser=ANN)
    assert tg.ephemeral_message(GROUP, sent.ephemeral_message_id)["text"] == "1 fact"
