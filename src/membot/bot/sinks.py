"""Where a Telegram turn's words go: the agent's reply sinks for one message, and the labels
that follow an answer (a consultation's round, a stop). A sink sends; what it sends is the
core's (core/turn.py ReplySink)."""

from __future__ import annotations

from dataclasses import dataclass

from aiogram import Bot
from aiogram.types import Message

from membot.bot import texts
from membot.bot.drafts import Drafts
from membot.bot.outbox import Outbox
from membot.bot.render import send_markdown, topic_of
from membot.core.stops import Stop
from membot.core.turn import TurnResult
from membot.ids import ConversationId
from membot.memory.contract.delivery import Delivery
from membot.memory.contract.repository import ChatRepository

# How much of a voice message's transcript is quoted above the answer.
HEARD_CHARS = 300


@dataclass(frozen=True, slots=True)
class Target:
    """Where a turn's answer goes: the chat, the message it replies to in a group (None in a
    private chat, and for a due task, which answers no message), the forum topic."""

    chat_id: int
    reply_to: int | None = None
    thread: int | None = None

    @classmethod
    def of(cls, message: Message) -> Target:
        group = message.chat.type != "private"
        return cls(message.chat.id, message.message_id if group else None, topic_of(message))


class TelegramSink:
    """The agent's ReplySink for one Telegram turn: Markdown in, rendered parts out. The
    answer of a consultation round carries where the dialog stands ("Round 2 of 3"). The
    answer is stored with how it is sent (`delivery`) and sent by the outbox, which marks it
    delivered (bot/outbox.py): one the process did not live to send is sent by the next.
    `to`: a message (the answer replies to it in a group), or a Target."""

    def __init__(self, bot: Bot, to: Message | Target, repository: ChatRepository) -> None:
        self.bot = bot
        self.target = to if isinstance(to, Target) else Target.of(to)
        self.outbox = Outbox(bot, repository)

    async def progress(self, text: str) -> None:
        await self._send(text)

    def delivery(self, result: TurnResult) -> Delivery:
        # An answer that cites earlier messages replies to the first it can (a user's
        # message), quoting the cited part; the others are dated quotes under it. Not where
        # the answer replies already (a group: to the question) nor in a forum topic.
        words = texts.get(result.state.language)
        reply_to, quote, shown = self.target.reply_to, "", list(result.citations)
        if reply_to is None and self.target.thread is None:
            first = next((c for c in shown if c.tg_message_id is not None), None)
            if first is not None:
                reply_to, quote = first.tg_message_id, first.quote if first.verbatim else ""
                shown.remove(first)
        return Delivery(
            reply_to=reply_to,
            thread=self.target.thread,
            # What the bot heard in a voice message comes first: the user sees it was heard.
            quote=shorten(result.heard, HEARD_CHARS) if result.heard else "",
            suffix=stopped_label(result) + round_label(result),
            # The answer's sources are stored with it; the words above them, here.
            sources_head=words.SOURCES if result.sources else "",
            reply_quote=quote,
            cited_head=words.CITED if shown else "",
            cited_self=words.CITED_SELF if any(c.role == "assistant" for c in shown) else "",
        )

    async def answer(self, result: TurnResult) -> None:
        cid = ConversationId.telegram(self.target.chat_id)
        delivery = self.delivery(result)  # as stored with it
        await self.outbox.deliver(
            cid,
            result.reply,
            delivery,
            first_seq=result.first_seq,
            seq=result.seq,
            sources=result.sources,
            citations=result.citations,
        )

    async def _send(self, text: str, quote: str = "") -> None:
        await send_markdown(
            self.bot,
            self.target.chat_id,
            text,
            reply_to=self.target.reply_to,
            thread_id=self.target.thread,
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
        stop: Stop,
    ) -> None:
        super().__init__(bot, message, repository)
        self.drafts = drafts
        self._stop = stop

    @property
    def stop(self) -> Stop:
        return self._stop

    @property
    def hold(self) -> float:
        # Drafts go out a second apart at most: text held half that is in them at most half a
        # second later, and read from the model four times less often than at the default.
        return self.drafts.pacing.interval / 2

    def written(self) -> None:
        self.drafts.written()

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
