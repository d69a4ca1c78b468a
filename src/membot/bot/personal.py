"""Answers that concern one member of a group, for their eyes only: /memory, /usage, /tasks,
a budget or rate-limit refusal, the confirmation steps of /forget. `send_personal` tries:

1. an ephemeral message in the group (Bot API 10.2 `ephemeral_message_parameters` with
   `receiver_user_id`): shown to that member only, buttons and all;
2. where Telegram refuses it (400 or 403), a private message to the member, headed by the
   group's name, without buttons: a button acts on the chat it is pressed in;
3. where that is refused too (the member never started the bot, or blocked it), the group:
   the answer itself when all may see it (`public` None), else the note `public` (for
   /memory: "start a private chat with me, then ask again").

In a private chat the answer is an ordinary message. Other failures (the network, 5xx) are
raised as for any send. `edit_personal` edits such a message after a button under it was
pressed: an ephemeral one has no message id and is edited with editEphemeralMessageText.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from aiogram import Bot
from aiogram.exceptions import TelegramBadRequest, TelegramForbiddenError
from aiogram.types import (
    CallbackQuery,
    Chat,
    EphemeralMessageParameters,
    InlineKeyboardMarkup,
    Message,
    MessageEntity,
    ReplyParameters,
)
from aiogram.utils.formatting import Text

from membot.bot import texts
from membot.bot.citations import utf16_len
from membot.bot.render import TELEGRAM_LIMIT, split_message, topic_of
from membot.bot.send import send_text

log = logging.getLogger(__name__)

Refused = (TelegramBadRequest, TelegramForbiddenError)


class Route(StrEnum):
    """Where a personal answer went."""

    EPHEMERAL = "ephemeral"  # in the group, to the member only
    PRIVATE = "private"  # the member's private chat with the bot
    CHAT = "chat"  # the chat itself: a private chat, or the group as a last resort
    NOTE = "note"  # the group got the `public` note instead of the answer


@dataclass(frozen=True, slots=True)
class Piece:
    """One message of an answer: text, its entities (UTF-16 offsets, as render.Part) and
    the buttons under it."""

    text: str
    entities: list[dict[str, Any]] = field(default_factory=list)
    markup: InlineKeyboardMarkup | None = None


@dataclass(frozen=True, slots=True)
class Audience:
    """Whom an answer concerns: the member (`user_id`; None for an anonymous admin or a
    channel, who can be reached only in the chat), where they asked, and what started it."""

    chat: Chat
    user_id: int | None
    thread_id: int | None = None
    reply_to: int | None = None  # the member's message, for the note of step 3
    callback_query_id: str | None = None  # the button press this answers, if any

    @classmethod
    def of(cls, message: Message) -> Audience:
        """The sender of `message`, in its chat and forum topic."""
        user = message.from_user
        return cls(
            chat=message.chat,
            user_id=user.id if user is not None else None,
            thread_id=topic_of(message),
            reply_to=message.message_id or None,
        )

    @classmethod
    def of_press(cls, query: CallbackQuery) -> Audience | None:
        """Who pressed a button, in the chat of the message it is under; None when that
        message is too old for the bot to see."""
        message = query.message
        if not isinstance(message, Message):
            return None
        return cls(
            chat=message.chat,
            user_id=query.from_user.id,
            thread_id=topic_of(message),
            callback_query_id=query.id,
        )


def pieces(
    content: str | Text | Sequence[Piece], markup: InlineKeyboardMarkup | None = None
) -> list[Piece]:
    """`content` as messages that fit Telegram's limit; `markup` under the last one."""
    if isinstance(content, str | Text):
        text, entities = _block(content)
        parts = split_message(text, entities, TELEGRAM_LIMIT)
        found = [Piece(p.text, p.entities) for p in parts]
    else:
        found = list(content)
    if markup is not None and found:
        last = found[-1]
        found[-1] = Piece(last.text, last.entities, markup)
    return found


async def send_personal(
    bot: Bot,
    to: Audience,
    content: str | Text | Sequence[Piece],
    *,
    markup: InlineKeyboardMarkup | None = None,
    header: str = "",
    public: str | None = None,
    sent: list[Message] | None = None,
) -> Route:
    """Send `content` (a text, formatted Text, or ready Pieces) to `to.user_id` only, as
    the module says: ephemeral, else private, else in the chat. `markup` goes under the last
    message; `header` heads the private copy (the group's name, in the chat's words);
    `public`, when given, is what the group is shown instead of the answer at the end;
    `sent` gets the messages sent privately (for the caller to take back later)."""
    answer = pieces(content, markup)
    if not answer:
        raise ValueError("nothing to send")
    chat = to.chat
    if chat.type == "private":
        for piece in answer:
            await _send(bot, chat.id, piece, thread_id=to.thread_id)
        return Route.CHAT
    if to.user_id is not None:
        ephemeral = EphemeralMessageParameters(
            receiver_user_id=to.user_id, callback_query_id=to.callback_query_id
        )
        if await _tried(bot, chat.id, answer, thread_id=to.thread_id, ephemeral=ephemeral):
            return Route.EPHEMERAL
        private = [Piece(p.text, p.entities) for p in _headed(answer, header)]
        if await _tried(bot, to.user_id, private, sent=sent):
            return Route.PRIVATE
    if public is not None:
        reply = (
            ReplyParameters(message_id=to.reply_to, allow_sending_without_reply=True)
            if to.reply_to
            else None
        )
        await _send(bot, chat.id, Piece(public), thread_id=to.thread_id, reply=reply)
        return Route.NOTE
    for piece in answer:
        await _send(bot, chat.id, piece, thread_id=to.thread_id)
    return Route.CHAT


async def answer_personal(
    bot: Bot,
    message: Message,
    words: texts.Texts,
    content: str | Text | Sequence[Piece],
    *,
    markup: InlineKeyboardMarkup | None = None,
    secret: bool = False,
    sent: list[Message] | None = None,
) -> Route:
    """`send_personal` for a handler answering the member's `message`, in the chat's
    `words`. `secret`: never shown to the group, which is told instead to open a private
    chat with the bot (PERSONAL_START)."""
    public = None
    if secret:
        user = message.from_user
        name = user.first_name if user is not None else ""
        public = words.PERSONAL_START.format(name=name, bot=(await bot.me()).username or "")
    header = words.PERSONAL_FROM.format(chat=message.chat.title or "")
    return await send_personal(
        bot, Audience.of(message), content, markup=markup, header=header, public=public, sent=sent
    )


async def edit_personal(
    bot: Bot,
    message: Message,
    content: str | Text,
    markup: InlineKeyboardMarkup | None = None,
    *,
    presser: int | None = None,
) -> bool:
    """Replace the text and buttons of the bot's `message` (one that fits one message),
    ephemeral or not; `presser`, who pressed a button under it (an ephemeral message's
    receiver, should the message not say). False when Telegram refused the edit (the
    message is gone, or the same text and buttons again): an edit only shows what is done."""
    text, entities = _block(content)
    ents = [MessageEntity(**e) for e in entities] or None
    receiver = message.receiver_user.id if message.receiver_user is not None else presser
    same: dict[str, Any] = {"text": text, "entities": ents, "reply_markup": markup}
    chat_id = message.chat.id
    try:
        if message.ephemeral_message_id is not None and receiver is not None:
            await bot.edit_ephemeral_message_text(
                chat_id=chat_id,
                receiver_user_id=receiver,
                ephemeral_message_id=message.ephemeral_message_id,
                parse_mode=None,
                **same,
            )
        else:
            await bot.edit_message_text(
                chat_id=chat_id, message_id=message.message_id, parse_mode=None, **same
            )
    except TelegramBadRequest as exc:
        log.debug("chat %s: edit refused: %s", message.chat.id, exc.message)
        return False
    return True


def _block(content: str | Text) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(content, str):
        return content, []
    made = content.as_kwargs()
    entities = [e.model_dump(exclude_none=True) for e in made.get("entities") or []]
    return str(made["text"]), entities


def _headed(answer: list[Piece], header: str) -> list[Piece]:
    """The private copy: `header` and a blank line before the first message, or as a
    message of its own where the first has no room for it."""
    if not header:
        return answer
    head = header + "\n\n"
    first = answer[0]
    if utf16_len(head + first.text) > TELEGRAM_LIMIT:
        return [Piece(header), *answer]
    shift = utf16_len(head)
    moved = [{**e, "offset": e["offset"] + shift} for e in first.entities]
    return [Piece(head + first.text, moved, first.markup), *answer[1:]]


async def _tried(
    bot: Bot,
    chat_id: int,
    answer: Sequence[Piece],
    *,
    thread_id: int | None = None,
    ephemeral: EphemeralMessageParameters | None = None,
    sent: list[Message] | None = None,
) -> bool:
    """True when every message went; False when Telegram refused the first (400, 403),
    so the answer may go another way. A refusal after the first is raised: the member has
    part of the answer already, and a second copy elsewhere would not help."""
    found = [] if sent is None else sent
    try:
        found.append(await _send(bot, chat_id, answer[0], thread_id=thread_id, ephemeral=ephemeral))
    except Refused as exc:
        where = "an ephemeral message" if ephemeral is not None else "a private message"
        log.info("chat %s: Telegram refused %s: %s", chat_id, where, exc.message)
        return False
    for piece in answer[1:]:
        found.append(await _send(bot, chat_id, piece, thread_id=thread_id, ephemeral=ephemeral))
    return True


async def _send(
    bot: Bot,
    chat_id: int,
    piece: Piece,
    *,
    thread_id: int | None = None,
    ephemeral: EphemeralMessageParameters | None = None,
    reply: ReplyParameters | None = None,
) -> Message:
    return await send_text(
        bot,
        chat_id,
        piece.text,
        piece.entities,
        thread_id=thread_id,
        reply=reply,
        markup=piece.markup,
        ephemeral=ephemeral,
    )
