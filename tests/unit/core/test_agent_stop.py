"""The agent with a sink whose reader can stop the answer (Telegram's Stop button): the
model's stream is closed, what was written so far is stored as the answer marked as stopped
and then given to the sink, a consultation's round counts as answered, and a stop while
tools run cancels them and keeps nothing half-done."""

from __future__ import annotations

import asyncio

import pytest

from membot.core.agent import Agent
from membot.core.prompt import PromptBuilder
from membot.core.stops import Stop, Stops, until_stopped
from membot.core.summarizer import Summarizer
from membot.core.tools.context import TurnContext
from membot.core.turn import Incoming, TurnOptions, TurnResult
from membot.ids import ConversationId
from membot.llm.tools import NativeMode, ToolExecutor, ToolRegistry
from membot.memory import MemoryRepository
from membot.memory.contract.models import Message, Source
from tests.scripted import Reply, ScriptedModel, StoppableSink, tool_call

CHAT = ConversationId.telegram(7)
ANSWER = "Kazan in three days: the Kremlin, the river, and чак-чак."


def make(model: ScriptedModel, repo: MemoryRepository, tools: ToolExecutor | None = None) -> Agent:
    return Agent(
        model=model,
        repository=repo,
        prompts=PromptBuilder("You are the test assistant."),
        summarizer=Summarizer(model, repo, every=1000),
        window_size=20,
        tools=tools,
        tool_mode=NativeMode(),
        max_tool_steps=4,
        detect=lambda text: None,
    )


def said(text: str) -> Incoming:
    return Incoming(conversation=CHAT, text=text, user_id=7)


async def archive(repo: MemoryRepository) -> list[Message]:
    return await repo.tail(CHAT, 100)


async def test_a_stopped_answer_is_stored_as_written_so_far_then_given(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    at_answer: list[list[Message]] = []

    async def look(result: TurnResult) -> None:
        at_answer.append(await archive(repo))

    never = asyncio.Event()  # the model would go on writing for ever
    model.script(Reply(ANSWER, midway=never), "Fine, here is the rest.")
    sink = StoppableSink(stop_after=1)
    sink.on_answer = look
    result = await make(model, repo).respond(said("Plan a trip"), sink)
    assert model.closed_early == 1  # the stream was closed, not read to its end
    assert result.stopped and result.reply == ANSWER[:4] == sink.streamed
    [[question, answer]] = at_answer  # stored before it was given
    assert (question.content, question.stopped) == ("Plan a trip", False)
    assert (answer.role, answer.content, answer.stopped) == ("assistant", ANSWER[:4], True)

    # The chat goes on; the model is told the earlier answer was stopped.
    result = await make(model, repo).respond(said("go on"), StoppableSink())
    assert not result.stopped and result.reply == "Fine, here is the rest."
    shown = model.chat_requests[-1].messages
    assert shown[-2]["role"] == "assistant" and shown[-2]["content"].startswith(ANSWER[:4])
    assert "stopped" in shown[-2]["content"]


async def test_a_stopped_answer_keeps_what_it_cited_so_far(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    # A web search's sources come in the stream's first chunks: stopped after them, the
    # answer is stored (and sent) with them.
    page = Source("https://kazan.example/kremlin", "The Kremlin")
    never = asyncio.Event()
    model.script(Reply(ANSWER, midway=never, sources=(page,)))
    result = await make(model, repo).respond(said("Plan a trip"), StoppableSink(stop_after=1))
    assert result.stopped and result.sources == (page,)
    assert (await archive(repo))[-1].sources == (page,)


async def test_a_stopped_round_counts_as_answered(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    agent = make(model, repo)
    never = asyncio.Event()
    model.script(Reply("Round one: which dates? And how many people?", midway=never))
    result = await agent.respond(
        said("Plan a trip"), StoppableSink(stop_after=1), TurnOptions(start=3)
    )
    assert result.stopped and result.plan is not None and result.plan.round == 1
    state = (await repo.get_meta(CHAT)).state
    assert (state.round, state.max_rounds) == (1, 3)
    model.script("Round two: your budget?")
    result = await agent.respond(said("In May, two of us"), StoppableSink())
    assert result.plan is not None and result.plan.round == 2 and not result.stopped


async def test_a_stop_while_tools_run_cancels_them_and_keeps_nothing_half_done(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    """Calls of the step cut short are not stored, nor what those that had ended changed
    (a fact noted, a consultation started): the turn keeps what the user saw."""
    running = asyncio.Event()
    cancelled: list[bool] = []
    registry = ToolRegistry()

    @registry.tool
    async def look_up(query: str) -> str:
        """Look something up, slowly.

        Args:
            query: What to look up.
        """
        running.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "never"

    @registry.tool
    async def note(ctx: TurnContext, fact: str) -> str:
        """Note a fact.

        Args:
            fact: The fact.
        """
        assert ctx.facts is not None
        await ctx.facts.add(fact)
        return "noted"

    @registry.tool
    async def start_consultation(ctx: TurnContext, request: str) -> str:
        """Start a consultation.

        Args:
            request: What it is about.
        """
        assert ctx.consultation is not None
        return ctx.consultation.start(request, 3)

    calls = (
        tool_call("note", fact="Anna likes Kazan"),
        tool_call("start_consultation", request="a trip"),
        tool_call("look_up", query="Kazan"),
    )
    model.script(Reply("Let me look that up.", *calls))
    sink = StoppableSink()
    turn = asyncio.create_task(
        make(model, repo, ToolExecutor(registry, timeout=60)).respond(said("Kazan?"), sink)
    )
    await running.wait()
    sink.stop.set()
    result = await turn
    assert cancelled == [True]
    assert result.stopped and result.reply == "" and result.plan is None
    stored = [(m.role, m.content, m.tool_calls, m.stopped) for m in await archive(repo)]
    assert stored == [
        ("user", "Kazan?", (), False),
        ("assistant", "Let me look that up.", (), False),  # sent as progress: kept, calls not
        ("assistant", "", (), True),
    ]
    assert sink.progress_texts == ["Let me look that up."]
    assert len(model.requests) == 1
    assert await repo.get_facts(CHAT) == []
    assert (await repo.get_meta(CHAT)).state.mode == "chat"


async def test_stops_reach_only_an_answer_in_progress() -> None:
    stops = Stops()
    assert not stops.stop(7, 11)  # nothing in progress: ignored
    with stops.register(7, 11) as stop:
        assert not stops.stop(7, 12) and not stops.stop(8, 11)
        assert not stop.is_set()
        assert stops.stop(7, 11) and stop.is_set()
    assert len(stops) == 0 and not stops.stop(7, 11)


async def test_until_stopped_prefers_work_that_is_done() -> None:
    stop = Stop()

    async def quick() -> int:
        return 42

    assert await until_stopped(quick(), stop) == 42
    stop.set()
    ran: list[str] = []

    async def slow() -> int:
        ran.append("started")
        await asyncio.Event().wait()
        return 0

    assert await until_stopped(slow(), stop) is None


async def test_a_cancelled_caller_is_cancelled_even_when_the_work_loses_the_cancellation() -> None:
    # As asyncio.wait_for does on Python 3.11 when its inner work finishes as it is cancelled
    # (redis-py wraps each write in one): the work returns instead of raising. The turn
    # being cancelled (shutdown past its grace) must still end there, not run on.
    started = asyncio.Event()

    async def work() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "written"
        return "never"

    caller = asyncio.ensure_future(until_stopped(work(), Stop()))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller


async def test_until_stopped_ends_the_work_cleaned_up_and_a_cancelled_caller_is_cancelled() -> None:
    events: list[str] = []
    started = asyncio.Event()

    async def work() -> int:
        try:
            started.set()
            await asyncio.Event().wait()
            return 0
        finally:
            events.append("cleaned up")

    stop = Stop()
    running = asyncio.ensure_future(until_stopped(work(), stop))
    await started.wait()
    stop.set()  # as the Stop button does: the work ends, its cleanup done first
    assert await running is None and events == ["cleaned up"]

    started.clear()
    caller = asyncio.ensure_future(until_stopped(work(), Stop()))
    await started.wait()
    caller.cancel()  # not a stop: the caller's cancellation goes on, after the cleanup
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert events == ["cleaned up", "cleaned up"]
