"""The answer shown while it is written, in a private chat: Telegram's message drafts.

`Drafts` keeps the text the model has written so far and one task that shows it with
`sendMessageDraft` (one draft id per answer, with Telegram's Stop button): when at least
`min_new` characters are new, and no more often than once per `interval` (Telegram tolerates
about one update a second; drafts are never sent in a burst). The pacing is a `DraftPacing`
given by the wiring (bot/app.py): Telegram's defaults in production, a faster one in tests
that are not about the pacing. Until the first draft is
shown, the same task keeps the typing indicator on. A draft is a preview only: the answer is
stored and then sent as a message (TelegramSink.answer), which replaces the draft; once the
model has finished writing (`written`), no draft is sent for what the message is about to show.

Nothing here may cost the user the answer: a 429 pauses the drafts for its retry_after, any
other failure for `backoff`; `add` never raises and never waits on Telegram."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from dataclasses import dataclass

from aiogram import Bot
from aiogram.exceptions import TelegramBadRequest, TelegramRetryAfter
from aiogram.types import MessageEntity

from membot.bot.render import render
from membot.bot.throttle import DraftSkipped

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = 5  # a slow draft must not hold up the answer for long


@dataclass(frozen=True)
class DraftPacing:
    """How often an answer's drafts go out; the defaults are what Telegram tolerates."""

    interval: float = 1.0  # seconds between two drafts of one answer, at least
    # No draft before the stream has run this long: a fast model's answer is done by then,
    # and a draft replaced by the message a moment later is a Bot API call for nothing.
    first_after: float = 0.3
    min_new: int = 24  # characters that make a new draft worth sending
    backoff: float = 5.0  # seconds the drafts pause after a failure that was not a 429
    typing_every: float = 5.0  # Telegram shows "typing…" for about 5 s


TELEGRAM_PACING = DraftPacing()  # production's


# Draft ids: non-zero, unique per answer within this process (a draft with the same id in
# the same chat is animated as a change of that draft; a new id starts a new one).
_ids = itertools.count(int(time.time() * 1000) % 1_000_000_000 + 1)


class Drafts:
    """The drafts of one answer in one private chat. Use as `async with`: the task that
    sends them lives inside the block and is ended (awaited) when it closes."""

    def __init__(self, bot: Bot, chat_id: int, pacing: DraftPacing) -> None:
        self.bot = bot
        self.pacing = pacing
        self.chat_id = chat_id
        self.draft_id = next(_ids)
        self.text = ""
        self.quote = ""  # shown above the text, as the answer shows it (what was heard)
        self._quoted = ""  # the quote the last draft showed
        self.sent = 0  # drafts Telegram accepted
        self._shown = 0  # len(self.text) when the last draft was sent
        self._next_at = 0.0  # time.monotonic() before which no draft is sent
        self._start_at = time.monotonic() + pacing.first_after  # ... nor before this one
        self._closed = False
        self._written = False  # the model has finished writing `text`: no draft shows it
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()  # one draft in flight; `reset` and `close` wait for it
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Drafts:
        self._task = asyncio.create_task(self._run(), name=f"drafts-{self.chat_id}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def add(self, text: str) -> None:
        """More of the answer (never raises, never waits)."""
        self.text += text
        self._written = False
        self._wake.set()

    def written(self) -> None:
        """The model has finished writing what the drafts hold: it is about to be sent as a
        message, which replaces any draft, so none is sent for it (a draft the message
        replaces a moment later is a Bot API call for nothing). Text added after this (a
        later step's) is shown again as it comes."""
        self._written = True

    def head(self, quote: str) -> None:
        """A quotation above the answer, shown at once (never raises, never waits)."""
        self.quote = quote
        self._start_at = 0.0  # what was heard is shown at once
        self._wake.set()

    async def reset(self) -> None:
        """Start again from empty: what the draft showed is about to become a message."""
        async with self._lock:
            self.text, self._shown = "", 0

    async def close(self) -> None:
        """No more drafts: waits for the one in flight, so none lands after the answer."""
        self._closed = True
        async with self._lock:
            pass
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _due(self) -> bool:
        if self._written:
            return False
        new = len(self.text) - self._shown
        worth = new >= self.pacing.min_new and bool(self.text.strip())
        return worth or self.quote != self._quoted

    async def _run(self) -> None:
        try:
            await self._loop()
        except Exception as exc:  # a bug here must cost the drafts, never the answer
            # The traceback may quote the answer: at DEBUG only.
            log.error(
                "chat %s: drafts stopped: %s",
                self.chat_id,
                type(exc).__name__,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )

    async def _loop(self) -> None:
        typing_every = self.pacing.typing_every
        await self._typing()
        typed_at = time.monotonic()
        while not self._closed:
            now = time.monotonic()
            if self.sent == 0 and now - typed_at >= typing_every:
                await self._typing()
                typed_at = now
            if not self._due():
                self._wake.clear()
                timeout = typing_every if self.sent == 0 else None
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):  # no task per wait, as wait_for's
                        await self._wake.wait()
                continue
            wait = max(self._next_at, self._start_at) - now
            if wait > 0:  # pacing, not synchronisation: Telegram's limit on drafts
                await asyncio.sleep(min(wait, typing_every))
                continue
            async with self._lock:
                if not self._closed and self._due():
                    await self._show()

    async def _show(self) -> None:
        length, quote = len(self.text), self.quote
        # A long answer shows its last part: the one being written.
        part = render(self.text, quote=quote)[-1]
        entities = [MessageEntity(**e) for e in part.entities] or None
        try:
            try:
                await self._send(part.text, entities)
            except TelegramBadRequest:
                if entities is None:
                    raise
                await self._send(part.text, None)  # formatting refused: plain text
        except DraftSkipped:  # the bot's budget is for messages first (bot/throttle.py)
            self._next_at = time.monotonic() + self.pacing.interval
            return
        except TelegramRetryAfter as exc:
            log.warning("chat %s: drafts paused %ss (flood control)", self.chat_id, exc.retry_after)
            self._next_at = time.monotonic() + exc.retry_after
            return
        except Exception as exc:  # a draft is a preview: its failure must not end the turn
            log.warning("chat %s: draft not shown: %s", self.chat_id, type(exc).__name__)
            self._next_at = time.monotonic() + self.pacing.backoff
            return
        self.sent += 1
        self._shown, self._quoted = length, quote
        self._next_at = time.monotonic() + self.pacing.interval

    async def _send(self, text: str, entities: list[MessageEntity] | None) -> None:
        await self.bot.send_message_draft(
            self.chat_id,
            self.draft_id,
            text=text,
            entities=entities,
            parse_mode=None,
            # Stop ends the answer where it is (stopped_message_generation reaches the turn
            # through the intake's runner, core/stops.py): it is stored and sent as written.
            can_stop=True,
            request_timeout=REQUEST_TIMEOUT,
        )

    async def _typing(self) -> None:
        try:
            await self.bot.send_chat_action(self.chat_id, "typing")
        except Exception as exc:  # the indicator is a courtesy
            log.debug("chat %s: typing not shown: %s", self.chat_id, type(exc).__name__)
