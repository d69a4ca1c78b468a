"""A turn cancelled while it is being kept (an API client that disconnects: the server cancels
its request's handler, and the turn with it): once the storing has begun, the turn is kept
whole, the facts its tools noted with its messages, and the cancellation goes on after."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from membot.core.agent import Agent
from membot.core.prompt import PromptBuilder
from membot.core.summarizer import Summarizer
from membot.core.tools.builtin import builtin
from membot.core.turn import Incoming
from membot.ids import ConversationId
from membot.llm.tools import NativeMode, ToolExecutor
from membot.memory import ConversationState, MemoryRepository, Message
from tests.scripted import RecordingSink, ScriptedModel, tool_call

CHAT = ConversationId.telegram(7)


class SlowAppend(MemoryRepository):
    """The in-memory backend whose append is still finishing when its caller is cancelled,
    as FileRepository's (a write in its thread runs to its end) or Redis's (a MULTI sent)."""

    def __init__(self) -> None:
        super().__init__()
        self.appending = asyncio.Event()
        self.finish = asyncio.Event()

    async def append(
        self,
        cid: ConversationId,
        messages: Sequence[Message],
        state: ConversationState | None = None,
    ) -> list[Message]:
        stored = await super().append(cid, messages, state)
        self.appending.set()
        await self.finish.wait()
        return stored


async def test_a_turn_cancelled_while_it_is_stored_keeps_its_facts(model: ScriptedModel) -> None:
    repo = SlowAppend()
    agent = Agent(
        model=model,
        repository=repo,
        prompts=PromptBuilder("You are the test assistant."),
        summarizer=Summarizer(model, repo, every=1000),
        window_size=20,
        tools=ToolExecutor(builtin.subset(("remember",)), timeout=5),
        tool_mode=NativeMode(),
        max_tool_steps=4,
        detect=lambda text: None,
    )
    model.script(tool_call("remember", fact="Anna is vegetarian"), "Noted.")
    incoming = Incoming(conversation=CHAT, text="remember I'm vegetarian", user_id=7)
    turn = asyncio.create_task(agent.respond(incoming, RecordingSink()))
    try:
        async with asyncio.timeout(10):
            await repo.appending.wait()
            turn.cancel()  # the client went away just as the answer was being stored
            repo.finish.set()
            with pytest.raises(asyncio.CancelledError):
                await turn
        # The archive says "Remembered": the fact is kept with it, not lost.
        assert [m.role for m in await repo.tail(CHAT, 10)] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        assert await repo.get_facts(CHAT) == ["Anna is vegetarian"]
    finally:
        await agent.aclose()
