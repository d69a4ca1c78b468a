"""A due task's turn in its Telegram chat: the update from the clock (intake/due.py) answered
like a message, without a message to reply to.

The caller (the runner, through MembotApp.feed) holds the chat's turn. What to do is the
core's (core/timed.py `TaskTurns.begin`); here: the note for a task dropped as too late, the
author's budgets and rate limit (over one: one line instead of the turn), the turn with the
typing indicator, its answer sent where the task was set (its forum topic), and the task
moved on. A model that fails gets the apology once and the task is moved on too: a reminder
is not said twice, late, by a retry."""

from __future__ import annotations

import logging

from aiogram import Bot
from aiogram.exceptions import TelegramForbiddenError, TelegramNotFound
from aiogram.utils.chat_action import ChatActionSender

from membot.bot import texts
from membot.bot.refusals import over_limit
from membot.bot.sinks import Target, TelegramSink
from membot.bot.times import with_time
from membot.core.service import ConversationService
from membot.core.timed import Due, TaskTurns
from membot.llm.errors import LLMError, LLMRateLimited
from membot.schedule.models import Firing
from membot.schedule.show import chat_zone
from membot.usage import OverLimit

log = logging.getLogger(__name__)


class TaskDoor:
    def __init__(self, bot: Bot, service: ConversationService, turns: TaskTurns) -> None:
        self.bot = bot
        self.service = service
        self.turns = turns

    async def answer(self, firing: Firing) -> None:
        due = await self.turns.begin(firing)
        if due is None:
            return
        task = due.task
        if due.dropped:
            words = await self._words(due)
            # When it was due, as each reader's app shows a time (Bot API 9.5).
            zone = chat_zone(task.zone, "UTC")
            note = with_time(words.TASK_DROPPED, task.due, zone, text=task.text)
            await self.bot.send_message(
                task.chat, message_thread_id=task.thread, **note.as_kwargs()
            )
            return
        try:
            await self.service.admit(due.incoming)
        except OverLimit as refused:
            log.info("task %s not run: its author is over a limit (%s)", task.id, refused.limit)
            await self.turns.finish(due)
            words = await self._words(due)
            reason = over_limit(words, refused, self.service.quota)
            await self._say(due, words.TASK_NOT_RUN.format(reason=reason, text=task.text))
            return
        target = Target(task.chat, None, task.thread)
        try:
            async with ChatActionSender.typing(
                bot=self.bot, chat_id=task.chat, message_thread_id=task.thread
            ):
                await self.service.say(
                    due.incoming, TelegramSink(self.bot, target, self.service.repository)
                )
        except LLMError as exc:
            log.error("task %s: no answer: %s: %s", task.id, type(exc).__name__, exc)
            await self.turns.finish(due)
            words = await self._words(due)
            reason = words.LLM_BUSY if isinstance(exc, LLMRateLimited) else words.LLM_FAILED
            await self._say(due, words.TASK_NOT_RUN.format(reason=reason, text=task.text))
            return
        except (TelegramForbiddenError, TelegramNotFound) as exc:
            # The bot was blocked, kicked or the chat is gone: none of its tasks can reach it
            # any more, and each would still cost its author a model call every time.
            dropped = await self.turns.store.clear(task.chat)
            log.warning(
                "chat %s: the bot cannot write there (%s); its %d task(s) removed",
                task.chat,
                type(exc).__name__,
                dropped,
            )
            return
        except Exception:
            # Stored but not sent (Telegram failed): the outbox sends it; the task moves on.
            if await self.turns.ran(firing):
                await self.turns.finish(due)
            raise
        await self.turns.finish(due)
        log.info("task %s carried out in chat %s", task.id, task.chat)

    async def _words(self, due: Due) -> texts.Texts:
        return texts.get((await self.service.state(due.incoming.conversation)).language)

    async def _say(self, due: Due, text: str) -> None:
        await self.bot.send_message(due.task.chat, text, message_thread_id=due.task.thread)
