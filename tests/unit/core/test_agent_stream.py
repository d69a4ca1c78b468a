"""The agent with a sink that wants the answer as it is written: pieces as the model writes
them (a tool call never shown), the answer stored before `answer()` as ever, and a turn whose
reader goes away (or that is cancelled) stores nothing and counts no round."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from membot.core.agent import Agent
from membot.core.prompt import PromptBuilder
from membot.core.summarizer import Summarizer
from membot.core.tools.builtin import builtin
from membot.core.turn import Incoming, TurnOptions, TurnResult
from membot.ids import ConversationId
from membot.llm.structured import OutputSpec
from membot.llm.tools import ToolExecutor, ToolModeName, make_mode
from membot.memory import ConversationState, MemoryRepository
from membot.tasks import TaskSupervisor
from tests.scripted import (
    RecordingSink,
    Reply,
    ScriptedModel,
    StreamingSink,
    hermes_call,
    tool_call,
)

SESSION = ConversationId.api(uuid.UUID("5c7e2b1a-0d4e-4f50-8a6b-7c8d9e0f1a2b"))
ANSWER = "Kazan in three days: the Kremlin, the river, and чак-чак."


def make(model: ScriptedModel, repo: MemoryRepository, mode: ToolModeName = "native") -> Agent:
    return Agent(
        model=model,
        repository=repo,
        prompts=PromptBuilder("You are the test assistant."),
        summarizer=Summarizer(model, repo, every=1000),
        window_size=20,
        tools=ToolExecutor(builtin, timeout=5),
        tool_mode=make_mode(mode),
        max_tool_steps=4,
        tasks=TaskSupervisor(),
        detect=lambda text: None,
    )


def said(text: str) -> Incoming:
    return Incoming(conversation=SESSION, text=text, user_id=7)


async def stored(repo: MemoryRepository) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in await repo.tail(SESSION, 100)]


async def test_the_answer_streams_and_is_stored_before_it_is_given(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    at_answer: list[list[tuple[str, str]]] = []

    async def look(result: TurnResult) -> None:
        at_answer.append(await stored(repo))

    model.script(ANSWER)
    sink = StreamingSink()
    sink.on_answer = look
    result = await make(model, repo).respond(said("Plan a trip"), sink)
    assert model.streamed == 1 and len(sink.deltas) > 5
    assert sink.streamed == ANSWER == result.reply
    assert at_answer == [[("user", "Plan a trip"), ("assistant", ANSWER)]]
    assert [kind for kind, _ in sink.events][-1] == "answer"


class DraftLikeSink(StreamingSink):
    """A sink whose reader sees the text at a pace of its own (core/turn.py PacedSink)."""

    hold = 0.5

    def written(self) -> None:
        self.events.append(("written", self.streamed))


async def test_a_paced_sinks_hold_goes_with_the_request(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    # The model's stream may be read that seldom for it (llm/pacing.py); others get its default.
    model.script(ANSWER, ANSWER)
    await make(model, repo).respond(said("Plan a trip"), DraftLikeSink())
    await make(model, repo).respond(said("Plan a trip"), StreamingSink())
    assert [r.hold for r in model.chat_requests] == [0.5, None]


async def test_a_paced_sink_learns_the_model_has_finished_writing_before_any_message(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    # Each step's stream ends (its text all there) before that text goes out as a message:
    # a draft of it would be replaced at once (bot/drafts.py).
    model.script(Reply("Let me check.", tool_call("calculate", expression="6*7")), ANSWER)
    sink = DraftLikeSink()
    await make(model, repo).respond(said("6*7?"), sink)
    kinds = [kind for kind, _ in sink.events if kind != "delta"]
    assert kinds == ["written", "progress", "written", "answer"]
    assert [text for kind, text in sink.events if kind == "written"] == [
        "Let me check.",
        "Let me check." + ANSWER,
    ]


async def test_a_sink_without_delta_gets_a_plain_call(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script(ANSWER)
    await make(model, repo).respond(said("Plan a trip"), RecordingSink())
    assert model.streamed == 0


async def test_text_beside_a_tool_call_streams_as_progress(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script(Reply("Let me check.", tool_call("calculate", expression="6*7")), "It is 42.")
    sink = StreamingSink()
    await make(model, repo).respond(said("6*7?"), sink)
    assert sink.streamed == "Let me check.It is 42."
    assert sink.progress_texts == ["Let me check."]
    kinds = [kind for kind, _ in sink.events]
    assert kinds.index("progress") < len(kinds) - 1 - kinds[::-1].index("delta")


async def test_a_hermes_tool_call_is_never_shown(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    written = "Looking it up. " + hermes_call("calculate", expression="6*7") + " more"
    model.script(Reply(written), "It is 42.")
    sink = StreamingSink()
    result = await make(model, repo, "hermes").respond(said("6*7?"), sink)
    assert sink.streamed == "Looking it up.It is 42."
    assert "<" not in sink.streamed and result.reply == "It is 42."


async def test_an_answer_held_to_a_format_does_not_stream(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script('{"city": "Kazan"}')
    sink = StreamingSink()
    options = TurnOptions(output=OutputSpec(None))
    result = await make(model, repo).respond(said("json please"), sink, options)
    assert model.streamed == 0 and sink.deltas == [] and result.reply == '{"city": "Kazan"}'


async def test_a_reader_gone_mid_answer_stores_nothing_and_counts_no_round(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    agent = make(model, repo)
    model.script("Round one: which dates?")
    await agent.respond(said("Plan a trip"), RecordingSink(), TurnOptions(start=3))
    before = await stored(repo)
    consulting = (await repo.get_meta(SESSION)).state
    assert (consulting.round, consulting.max_rounds) == (1, 3)

    model.script(ANSWER)
    with pytest.raises(ConnectionResetError):
        await agent.respond(said("In May"), StreamingSink(fail_delta_after=2))
    assert model.closed_early == 1
    assert await stored(repo) == before
    assert (await repo.get_meta(SESSION)).state == consulting

    model.script("Round two: how many people?")
    result = await agent.respond(said("In May"), StreamingSink())
    assert result.plan is not None and result.plan.round == 2


async def test_a_cancelled_turn_stores_nothing(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    writing = asyncio.Event()
    midway = asyncio.Event()  # never set: the answer is still being written when cancelled

    async def noticed(text: str) -> None:
        writing.set()

    model.script(Reply(ANSWER, midway=midway))
    turn = asyncio.create_task(
        make(model, repo).respond(said("Plan a trip"), StreamingSink(on_delta=noticed))
    )
    await writing.wait()
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert model.closed_early == 1
    assert await stored(repo) == []
    assert (await repo.get_meta(SESSION)).state == ConversationState()
