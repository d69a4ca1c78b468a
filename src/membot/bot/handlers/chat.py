"""Text messages: hand them to the conversation service, render what it says."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable

from aiogram import Bot, F, Router
from aiogram.types import Message
from aiogram.utils.chat_action import ChatActionSender

from membot.bot import texts
from membot.bot.drafts import Drafts
from membot.bot.filters import AddressedToBot, Inline, strip_mention
from membot.bot.outbox import Outbox
from membot.bot.render import send_markdown, topic_of
from membot.core.service import ConversationService
from membot.core.turn import Incoming, TurnResult
from membot.ids import ConversationId
from membot.llm.errors import LLMError, LLMRateLimited
from membot.memory.base import ChatRepository
from membot.memory.delivery import Delivery
from membot.memory.state import ConversationState
from membot.usage import OverLimit

log = logging.getLogger(__name__)

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


Turn = Callable[[TelegramSink], Awaitable[TurnResult | None]]


async def run_turn(
    message: Message,
    bot: Bot,
    service: ConversationService,
    incoming: Incoming,
    turn: Turn,
    *,
    streaming: bool = False,
) -> TurnResult | None:
    """Run a turn with the typing indicator on; a model failure becomes a short apology, in
    the conversation's language (English if the failed turn was the one to detect it: a
    failed turn stores nothing). First the user's budgets and rate limit: a user over one
    gets one line saying which and when it resets, and nothing is sent or stored.
    `streaming` (STREAMING): in a private chat the answer is shown as drafts while it is
    written (DraftSink), the typing indicator on until the first; groups and forum topics
    get one message."""
    try:
        await service.admit(incoming)
    except OverLimit as refused:
        words = await texts_for(service, message)
        await message.answer(over_limit_text(words, refused, service))
        return None
    try:
        if streaming and message.chat.type == "private" and topic_of(message) is None:
            async with Drafts(bot, message.chat.id) as drafts:
                # Stop on the draft reaches the turn through the runner (intake/runner.py).
                with service.stops.register(message.chat.id, drafts.draft_id) as stop:
                    sink = DraftSink(bot, message, service.repository, drafts, stop)
                    return await turn(sink)
        async with ChatActionSender.typing(
            bot=bot, chat_id=message.chat.id, message_thread_id=topic_of(message)
        ):
            return await turn(TelegramSink(bot, message, service.repository))
    except LLMError as exc:
        log.error("chat %s: no answer: %s: %s", message.chat.id, type(exc).__name__, exc)
        words = await texts_for(service, message)
        await message.answer(
            words.LLM_BUSY if isinstance(exc, LLMRateLimited) else words.LLM_FAILED
        )
        return None


def over_limit_text(words: texts.Texts, refused: OverLimit, service: ConversationService) -> str:
    now = service.quota.clock() if service.quota is not None else refused.resets_at
    seconds = max(1, math.ceil((refused.resets_at - now).total_seconds()))
    if seconds >= 3600:
        wait = words.IN_HOURS.format(hours=seconds // 3600, minutes=seconds % 3600 // 60)
    elif seconds >= 60:
        wait = words.IN_MINUTES.format(minutes=math.ceil(seconds / 60))
    else:
        wait = words.IN_SECONDS.format(seconds=seconds)
    if refused.limit == "daily":
        return words.OVER_DAILY.format(wait=wait)
    if refused.limit == "monthly":
        return words.OVER_MONTHLY.format(date=refused.resets_at.date().isoformat(), wait=wait)
    limit = service.quota.limits.rate if service.quota is not None else 0
    return words.OVER_RATE.format(limit=limit, wait=wait)


async def chat_state(service: ConversationService, message: Message) -> ConversationState:
    return await service.state(ConversationId.telegram(message.chat.id))


async def texts_for(service: ConversationService, message: Message) -> texts.Texts:
    """The bot's words in the language of the message's chat."""
    return texts.get((await chat_state(service, message)).language)


def build_router() -> Router:
    router = Router(name="chat")

    @router.message(Inline(F.text), AddressedToBot())
    async def on_text(
        message: Message, bot: Bot, service: ConversationService, streaming: bool
    ) -> None:
        incoming = await to_incoming(message, bot)
        await run_turn(
            message,
            bot,
            service,
            incoming,
            lambda sink: service.say(incoming, sink),
            streaming=streaming,
        )

    return router


async def to_incoming(message: Message, bot: Bot, text: str | None = None) -> Incoming:
    """The message as the core sees it; `text` replaces the message's own (a command's
    argument)."""
    group = message.chat.type != "private"
    if text is None:
        text = message.text or ""
        if group:
            text = strip_mention(text, (await bot.me()).username)
    user = message.from_user
    return Incoming(
        conversation=ConversationId.telegram(message.chat.id),
        text=text,
        user_id=user.id if user else None,
        name=user.full_name if user else None,
        message_id=message.message_id,
        group=group,
    )
