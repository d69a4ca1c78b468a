"""Guest Mode (Bot API 10.0): a user calls the bot with an @mention into a chat it is not in,
and Telegram sends a `guest_message` with a `guest_query_id`. The bot answers it once, with
answerGuestQuery, from the caller's own memory: their private chat with the bot (whose id is
the user's), its window, summary, facts and search. Nothing is read or kept by the guest
chat's id, which may be another chat's of the bot's.

The order, as for any message: the allowlist, then the caller's private chat (none yet: no
memory to answer from), then the budgets and the rate limit; each refusal is one short line
and nothing is stored or sent to the model. Then the turn, in the caller's private
conversation: the runner holds its turn (a guest message's lane and turn are the caller's
private chat's, intake/contract.py `chat_of`), so it waits for a private answer in progress
and the next private message waits for it. Its question is stored with a note saying where
it was asked, marked with the query's id (`Message.guest`: the private chat knows it
happened; a query taken over by another worker is recognised as answered,
intake/repeats.py). The answer is collected, not shown as drafts, and sent once, when ready,
as one message.

Telegram waits 30 s for the answer: GUEST_DEADLINE after the message (its date, or when the
turn began if that is earlier by this process's clock) the turn is cut like a stopped one:
what was written is stored, marked stopped, and sent, with a label. A query already past its
deadline when its turn comes gets one line without a model call. A failure of the turn gets
one line too and is not tried again: Telegram takes one answer per query.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError
from aiogram.methods import AnswerGuestQuery
from aiogram.types import InlineQueryResultArticle, InputTextMessageContent, Message, MessageEntity

from membot.bot import texts
from membot.bot.filters import strip_mention
from membot.bot.middlewares import refusal
from membot.bot.refusals import over_limit
from membot.bot.render import TELEGRAM_LIMIT, render
from membot.bot.sinks import shorten
from membot.clock import Clock
from membot.core.service import ConversationService
from membot.core.stops import Stop
from membot.core.turn import Incoming, TurnResult
from membot.ids import ConversationId
from membot.llm.errors import LLMError, LLMRateLimited
from membot.usage import OverLimit

log = logging.getLogger(__name__)

# Where the question was asked, before its text: stored with it, so the private chat's
# later prompts (and its search) show that it was asked elsewhere and answered there.
GUEST_NOTE = "[Asked through Guest Mode in {where}; the answer was posted there, for all in it]"
# What was replied to, quoted after the note (Telegram sends the message replied to).
REPLY_NOTE = "[Replying to {name}: {text}]"
REPLY_CHARS = 500
# A refusal is one line of at most this many characters.
LINE_CHARS = 300


class GuestSink:
    """The turn's sink: the answer is collected (no drafts, no progress notes: the guest
    chat gets one message), and `stop` cuts it at the deadline (core/turn.py
    StoppableSink: what was written so far is the answer)."""

    def __init__(self, stop: Stop) -> None:
        self._stop = stop
        self.result: TurnResult | None = None

    @property
    def stop(self) -> Stop:
        return self._stop

    async def delta(self, text: str) -> None:
        return None  # the answer is sent whole once written (core/steps.py keeps it)

    async def progress(self, text: str) -> None:
        return None  # stored with the turn; the guest chat gets the answer alone

    async def answer(self, result: TurnResult) -> None:
        self.result = result


class GuestDoor:
    def __init__(
        self,
        bot: Bot,
        service: ConversationService,
        *,
        allowed: frozenset[int],
        deadline: float,
        clock: Clock,
    ) -> None:
        self.bot = bot
        self.service = service
        self.allowed = allowed
        self.deadline = timedelta(seconds=deadline)
        self.clock = clock

    async def answer(self, message: Message) -> None:
        """Answer one guest message (the caller holds the caller's private chat's turn)."""
        query, caller = message.guest_query_id, message.from_user
        if not query or caller is None:
            log.warning("a guest message without a query or a caller: ignored")
            return
        now = self.clock()
        cut_at = min(message.date, now) + self.deadline
        if self.allowed and caller.id not in self.allowed:
            log.info("guest query from user %s refused: not allowed", caller.id)
            await self._line(query, refusal(caller))
            return
        cid = ConversationId.telegram(caller.id)
        words = texts.get((caller.language_code or "").split("-")[0].lower())
        try:
            meta = await self.service.repository.get_meta(cid)
            if meta.degraded:  # the caller's memory cannot be read now
                await self._line(query, words.INTERNAL_ERROR)
                return
            if meta.messages_total == 0:
                log.info("guest query from user %s: no private chat yet", caller.id)
                bot = (await self.bot.me()).username or ""
                await self._line(query, words.GUEST_NO_CHAT.format(bot=bot))
                return
            words = texts.get(meta.state.language) if meta.state.language else words
            incoming = await self._incoming(message, cid, query)
            try:
                await self.service.admit(incoming)
            except OverLimit as refused:
                await self._line(query, over_limit(words, refused, self.service.quota))
                return
            remaining = (cut_at - self.clock()).total_seconds()
            if remaining <= 0:
                log.warning(
                    "guest query from user %s: past its deadline before its turn", caller.id
                )
                await self._line(query, words.GUEST_TOO_LATE)
                return
            result = await self._turn(incoming, remaining)
        except LLMError as exc:
            log.error("guest query of user %s: no answer: %s", caller.id, type(exc).__name__)
            busy = isinstance(exc, LLMRateLimited)
            await self._line(query, words.LLM_BUSY if busy else words.LLM_FAILED)
            return
        except Exception as exc:
            # Not tried again: Telegram takes one answer per query, and its time is short.
            log.error("guest query of user %s failed: %s", caller.id, type(exc).__name__)
            await self._line(query, words.INTERNAL_ERROR)
            return
        await self._send(query, result, words)

    async def _turn(self, incoming: Incoming, remaining: float) -> TurnResult:
        stop = Stop()
        cut = asyncio.get_running_loop().call_later(remaining, stop.set)
        try:
            sink = GuestSink(stop)
            return await self.service.say(incoming, sink)
        finally:
            cut.cancel()

    async def _incoming(self, message: Message, cid: ConversationId, query: str) -> Incoming:
        username = (await self.bot.me()).username
        text = strip_mention(message.text or message.caption or "", username)
        chat = message.chat
        where = (
            f"a private chat with {chat.full_name}"
            if chat.type == "private"
            else (f"the group “{chat.title or chat.id}”")
        )
        lines = [GUEST_NOTE.format(where=where)]
        quoted = message.reply_to_message
        if quoted is not None and (quoted.text or quoted.caption):
            name = quoted.from_user.full_name if quoted.from_user else "someone"
            said = shorten(quoted.text or quoted.caption or "", REPLY_CHARS)
            lines.append(REPLY_NOTE.format(name=name, text=said))
        lines.append(text)
        user = message.from_user
        return Incoming(
            conversation=cid,
            text="\n".join(lines),
            user_id=user.id if user else None,
            name=user.full_name if user else None,
            guest=query,
        )

    async def _send(self, query: str, result: TurnResult, words: texts.Texts) -> None:
        """The answer as one message: the first of its parts (the rest stays in the private
        chat's memory), with the cut's label when it was cut."""
        if result.stopped and not result.reply.strip():
            await self._line(query, words.GUEST_TOO_LATE)
            return
        parts = render(
            result.reply,
            TELEGRAM_LIMIT - 1,
            sources=result.sources,
            sources_head=words.SOURCES if result.sources else "",
            suffix=f"\n\n{words.GUEST_CUT}" if result.stopped else "",
        )
        text, entities = parts[0].text, parts[0].entities
        if len(parts) > 1:
            text += "…"
        await self._post(query, text, entities)
        log.info("guest query answered%s", " (cut at the deadline)" if result.stopped else "")

    async def _line(self, query: str, line: str) -> None:
        await self._post(query, shorten(line, LINE_CHARS), [])

    async def _post(self, query: str, text: str, entities: Sequence[dict[str, Any]]) -> None:
        content = InputTextMessageContent(
            message_text=text, entities=[MessageEntity(**e) for e in entities] or None
        )
        result = InlineQueryResultArticle(
            id="answer", title="membot", input_message_content=content
        )
        try:
            await self.bot(AnswerGuestQuery(guest_query_id=query, result=result))
        except TelegramAPIError as exc:
            # The query may have expired (a turn that waited too long): nobody to tell.
            log.warning("guest query not answered: %s", type(exc).__name__)
