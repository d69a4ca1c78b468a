"""Where a Telegram turn's words go: the agent's reply sinks for one message, and the labels
that follow an answer (a consultation's round, a stop). A sink sends; what it sends is the
core's (core/turn.py ReplySink)."""

from __future__ import annotations

import asyncio

from aiogram import Bot
from aiogram.types import Message

from membot.bot import texts
from membot.bot.drafts import Drafts
from membot.bot.outbox import Outbox
from membot.bot.render import send_markdown, topic_of
from membot.core.turn import TurnResult
from membot.ids import ConversationId
from membot.memory.contract.delivery import Delivery
from membot.memory.contract.repository import ChatRepository

# How much of a voice message's transcript is quoted above the answer.
HEARD_CHARS = 300


class TelegramSink:
    """The agent's ReplySink for one Telegram message: Markdown in, rendered parts out. The
    answer of a consultation round carries where the dialog stands ("Round 2 of 3"). The
    answer is stored with how it is sent (`delivery`) and sent by the outbox, which marks it
    delivered (bot/outbox.py): one the process did not live to send is sent by the next."""

    def __init__(self, bot: Bot, message: Message, repository: ChatRepository) -> None:
        self.bot = bot
        self.message = message
        self.outbox = Outbox(bot, repository)

    async def progress(self, text: str) -> None:
        await self._send(text)

    def delivery(self, result: TurnResult) -> Delivery:
        group = self.message.chat.type != "private"
        return Delivery(
            reply_to=self.message.message_id if group else None,
            thread=topic_of(self.message),
            # What the bot heard in a voice message comes first: the user sees it was heard.
            quote=shorten(result.heard, HEARD_CHARS) if result.heard else "",
            suffix=stopped_label(result) + round_label(result),
        )

    async def answer(self, result: TurnResult) -> None:
        cid = ConversationId.telegram(self.message.chat.id)
        delivery = self.delivery(result)  # as stored with it
        await self.outbox.deliver(
            cid, result.reply, delivery, first_seq=result.first_seq, seq=result.seq
        )

    async def _send(self, text: str, quote: str = "") -> None:
        group = self.message.chat.type != "private"
        await send_markdown(
            self.bot,
            self.message.chat.id,
            text,
            reply_to=self.message.message_id if group else None,
            thread_id=topic_of(self.message),
            quote=quote,
        )


class DraftSink(TelegramSink):
    """A TelegramSink that shows the answer while it is written (private chats, STREAMING):
    the agent streams the model for it, `delta` feeds the drafts (never raises, never waits
    on Telegram). Text beside a tool call streams into the draft too; `progress` then sends
    it as its own message, as without drafts (the message replaces the draft that showed
    it, so it is seen once) and the draft starts again empty for the next step's text.
    The answer is stored before `answer` is called; the drafts end, then it is sent.
    `stop` is set when the user presses Stop on the draft (core/stops.py): the answer is
    then what was written so far (core/turn.py StoppableSink)."""

    def __init__(
        self,
        bot: Bot,
        message: Message,
        repository: ChatRepository,
        drafts: Drafts,
        stop: asyncio.Event,
    ) -> None:
        super().__init__(bot, message, repository)
        self.drafts = drafts
        self._stop = stop

    @property
    def stop(self) -> asyncio.Event:
        return self._stop

    async def delta(self, text: str) -> None:
        self.drafts.add(text)

    async def heard(self, text: str) -> None:
        # The transcript heads the drafts as it heads the answer (TelegramSink.answer).
        self.drafts.head(shorten(text, HEARD_CHARS))

    async def progress(self, text: str) -> None:
        await self.drafts.reset()
        await super().progress(text)

    async def answer(self, result: TurnResult) -> None:
        await self.drafts.close()
        await super().answer(result)


def shorten(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,.;:") + "…"


def stopped_label(result: TurnResult) -> str:
    """After an answer the user stopped (alone, when it was stopped before any text)."""
    if not result.stopped:
        return ""
    words = texts.get(result.state.language)
    return f"\n\n{words.STOPPED}" if result.reply.strip() else words.STOPPED


def round_label(result: TurnResult) -> str:
    plan = result.plan
    if plan is None:
        return ""
    words = texts.get(result.state.language)  # the state the turn left: its language included
    label = words.ROUND_FINAL if plan.final else words.ROUND
    return "\n\n" + label.format(round=plan.round, max_rounds=plan.max_rounds)
