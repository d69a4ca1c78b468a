"""One turn of conversation, independent of Telegram: history -> prompt -> LLM (-> tools) ->
store -> reply."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from membot.llm.client import ChatMessage, ChatModel
from membot.llm.errors import LLMUnavailable
from membot.llm.prompt import PromptBuilder, to_chat_message
from membot.llm.summarizer import HistoryCompressor
from membot.llm.tools import NativeMode, ToolContext, ToolExecutor, ToolMode, ToolRegistry
from membot.memory.base import ChatRepository
from membot.memory.models import Message
from membot.tasks import TaskSupervisor

if TYPE_CHECKING:
    from membot.search import HistorySearch

log = logging.getLogger(__name__)

# The model spent every tool round and then still said nothing: say so rather than nothing.
GAVE_UP = "Sorry, I could not finish this one. Could you rephrase or narrow the question?"


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
    """Owns a turn. The order is the contract: the whole turn (user message, tool calls and
    results, answer) is durable before the answer is sent, and summarization starts only after
    the answer is out, in the background. Text the model writes beside a tool call is sent at
    once as progress; it is stored with the turn."""

    def __init__(
        self,
        *,
        model: ChatModel,
        repository: ChatRepository,
        prompts: PromptBuilder,
        summarizer: HistoryCompressor,
        window_size: int,
        tools: ToolExecutor | None = None,
        tool_mode: ToolMode | None = None,
        max_tool_rounds: int = 10,
        search: HistorySearch | None = None,
        tasks: TaskSupervisor | None = None,
    ) -> None:
        self.model = model
        self.repository = repository
        self.prompts = prompts
        self.summarizer = summarizer
        self.window_size = window_size
        self.tools = tools
        self.registry = tools.registry if tools else ToolRegistry()
        self.mode = tool_mode or NativeMode()
        # The registry is fixed for the agent's life; the mode's text for it is too.
        section = self.mode.system_section(self.registry)
        self.tools_system = [section] if section else []
        self.max_tool_rounds = max_tool_rounds
        self.search = search
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
        messages = self.prompts.build(
            summary=ctx.summary,
            history=ctx.history,
            new=user,
            group=incoming.group,
            facts=ctx.facts,
            extra_system=self.tools_system,
        )
        turn = [user, *await self._run(chat_id, messages, sink)]
        stored = await self.repository.append(chat_id, turn)
        reply = turn[-1].content
        await sink.send(reply)
        if self.summarizer.due(stored[-1].seq, ctx.meta.summarized_upto):
            self.tasks.spawn(("summary", chat_id), self.summarizer.maybe_summarize(chat_id))
        return reply

    async def _run(
        self, chat_id: int, messages: list[ChatMessage], sink: ReplySink
    ) -> list[Message]:
        """The model's side of the turn: tool rounds, then the answer. Returns what to store
        after the user message; the last item is the answer."""
        produced: list[Message] = []
        tool_ctx = ToolContext(chat_id=chat_id, repository=self.repository, search=self.search)
        for round_no in range(self.max_tool_rounds + 1):
            # The last round is "answer now": past the cap tools are refused, never looped on.
            final = round_no == self.max_tool_rounds
            request = self.mode.request(messages, self.registry, final=final)
            response = await self.model.complete(
                request.messages, tools=request.tools, tool_choice=request.tool_choice
            )
            text, calls = self.mode.parse(response)
            if not calls or self.tools is None or final:
                if calls:
                    why = "past the cap" if self.tools else "while tools are off"
                    log.warning("chat %s: tool calls made %s were ignored", chat_id, why)
                if not text:
                    if not produced:
                        raise LLMUnavailable("the model returned an empty answer")
                    text = GAVE_UP
                produced.append(Message(role="assistant", content=text))
                return produced
            if text:
                await self._progress(chat_id, sink, text)
            results = await self.tools.run(calls, tool_ctx)
            step = [
                Message(
                    role="assistant",
                    content=text,
                    tool_calls=tuple(call.to_openai() for call in calls),
                ),
                *(
                    Message(
                        role="tool",
                        content=result.content,
                        tool_call_id=result.call.id,
                        name=result.call.name,
                    )
                    for result in results
                ),
            ]
            produced.extend(step)
            messages = [*messages, *(to_chat_message(m) for m in step)]
        raise AssertionError("unreachable: the final round always returns")

    @staticmethod
    async def _progress(chat_id: int, sink: ReplySink, text: str) -> None:
        """Send "Let me look that up..." before the tools run. Best effort: a lost progress
        note must not cost the user the answer that follows."""
        try:
            await sink.send(text)
        except Exception as exc:
            log.warning("chat %s: progress text not delivered: %s", chat_id, type(exc).__name__)

    async def summary(self, chat_id: int) -> str:
        return await self.repository.get_summary(chat_id)

    async def facts(self, chat_id: int) -> list[str]:
        return await self.repository.get_facts(chat_id)

    async def reset(self, chat_id: int) -> None:
        """Forget the chat. A summary being made for it is stopped first, so none comes back."""
        await self.tasks.cancel(("summary", chat_id))
        await self.repository.reset(chat_id)
        if self.search is not None:
            await self.search.drop(chat_id)
        log.info("chat %s: memory reset", chat_id)

    async def aclose(self) -> None:
        await self.tasks.close()
