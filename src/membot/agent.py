"""One turn of conversation, independent of Telegram: history -> prompt -> LLM -> store -> reply."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from membot.llm.client import ChatModel
from membot.llm.errors import LLMUnavailable
from membot.llm.prompt import PromptBuilder
from membot.llm.summarizer import Summarizer
from membot.memory.base import ChatRepository
from membot.memory.models import Message
from membot.tasks import TaskSupervisor

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Incoming:
    """A user's message, as the agent needs it (no Telegram types)."""

    chat_id: int
    text: str
    user_id: int | None = None
    name: str | None = None
    message_id: int | None = None
    group: bool = False


class ReplySink(Protocol):
    """Where the agent's words go: a Telegram chat, an HTTP response, a test."""

    async def send(self, text: str) -> None: ...


class Agent:
    """Owns a turn. The order is the contract: the exchange is durable before the reply is
    sent, and summarization starts only after the reply is out, in the background."""

    def __init__(
        self,
        *,
        model: ChatModel,
        repository: ChatRepository,
        prompts: PromptBuilder,
        summarizer: Summarizer,
        window_size: int,
        tasks: TaskSupervisor | None = None,
    ) -> None:
        self.model = model
        self.repository = repository
        self.prompts = prompts
        self.summarizer = summarizer
        self.window_size = window_size
        self.tasks = tasks or TaskSupervisor()

    async def respond(self, incoming: Incoming, sink: ReplySink) -> str:
        """Answer one message. Raises LLMError (nothing stored) when the model fails."""
        chat_id = incoming.chat_id
        ctx = await self.repository.context(chat_id, self.window_size)
        user = Message(
            role="user",
            content=incoming.text,
            user_id=incoming.user_id,
            name=incoming.name,
            tg_message_id=incoming.message_id,
        )
        prompt = self.prompts.build(
            summary=ctx.summary, history=ctx.history, new=user, group=incoming.group
        )
        response = await self.model.complete(prompt)
        reply = response.content.strip()
        if not reply:
            raise LLMUnavailable("the model returned an empty answer")
        stored = await self.repository.append(
            chat_id, [user, Message(role="assistant", content=reply)]
        )
        await sink.send(reply)
        if self.summarizer.due(stored[-1].seq, ctx.meta.summarized_upto):
            self.tasks.spawn(("summary", chat_id), self.summarizer.maybe_summarize(chat_id))
        return reply

    async def summary(self, chat_id: int) -> str:
        return await self.repository.get_summary(chat_id)

    async def reset(self, chat_id: int) -> None:
        """Forget the chat. A summary being made for it is stopped first, so none comes back."""
        await self.tasks.cancel(("summary", chat_id))
        await self.repository.reset(chat_id)
        log.info("chat %s: memory reset", chat_id)

    async def aclose(self) -> None:
        await self.tasks.close()
