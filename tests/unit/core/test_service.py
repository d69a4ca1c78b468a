"""ConversationService: one conversation's messages one at a time and in arrival order, other
conversations side by side, work in flight counted for shutdown, consultation commands.

Timing is controlled by gates (asyncio.Event) on the scripted model's replies, never by sleeps.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from membot.core.agent import Agent
from membot.core.consult import FINAL_NOTE
from membot.core.prompt import PromptBuilder
from membot.core.service import ConversationBusy, ConversationService
from membot.core.summarizer import Summarizer
from membot.core.tools.builtin import builtin
from membot.core.turn import Incoming, TurnResult
from membot.ids import ConversationId
from membot.llm.tools import ToolExecutor, make_mode
from membot.memory import ConversationState, MemoryRepository, SessionConfig
from membot.tasks import TaskSupervisor
from membot.tool_names import BUILTIN_TOOL_NAMES
from tests.scripted import RecordingSink, Reply, ScriptedModel

CONSULT_ROUNDS = 3
MAX_ROUNDS = 5
ANN = ConversationId.telegram(1001)
BOB = ConversationId.api(uuid.UUID("6f1c2d3e-4b5a-4c7d-9e8f-0a1b2c3d4e5f"))


@pytest.fixture
async def service(
    model: ScriptedModel, repo: MemoryRepository
) -> AsyncIterator[ConversationService]:
    registry = builtin.subset(BUILTIN_TOOL_NAMES)
    agent = Agent(
        model=model,
        repository=repo,
        prompts=PromptBuilder("You are the test assistant."),
        summarizer=Summarizer(model, repo, every=1000),
        window_size=20,
        tools=ToolExecutor(registry, timeout=5),
        tool_mode=make_mode("native"),
        tasks=TaskSupervisor(),
        consult_rounds=CONSULT_ROUNDS,
        max_rounds=MAX_ROUNDS,
        detect=lambda text: None,  # detection has its own tests: test_language.py
    )
    svc = ConversationService(agent, repo, consult_rounds=CONSULT_ROUNDS, max_rounds=MAX_ROUNDS)
    yield svc
    await svc.aclose()


def said(cid: ConversationId, text: str) -> Incoming:
    return Incoming(conversation=cid, text=text, user_id=7, name="Ann")


async def until(condition: Callable[[], bool], what: str) -> None:
    """Let other tasks run until `condition` holds. Yields to the loop; never waits on time."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def turn(service: ConversationService, incoming: Incoming, sink: RecordingSink) -> TurnResult:
    """What a front door does with a message: take the conversation's turn, then say it."""
    async with service.ordered(incoming.conversation):
        return await service.say(incoming, sink)


# -- ordering ----------------------------------------------------------------------------------


async def test_one_conversations_messages_are_answered_one_at_a_time_in_order(
    service: ConversationService, model: ScriptedModel, repo: MemoryRepository
) -> None:
    gate = asyncio.Event()
    model.script(Reply("answer 1", gate=gate), "answer 2", "answer 3")
    journal: list[tuple[str, str]] = []
    tasks = [
        asyncio.create_task(
            turn(service, said(ANN, f"message {i}"), RecordingSink(f"m{i}", journal=journal))
        )
        for i in (1, 2, 3)
    ]
    await model.wait_for_requests(1)
    await until(lambda: service.in_flight == 3, "all three messages accepted")
    # The second and third wait for the first: the model has seen only one of them.
    assert len(model.requests) == 1
    assert model.requests[0].user_texts == ["message 1"]
    assert journal == []

    gate.set()
    await asyncio.gather(*tasks)
    assert journal == [("m1", "answer 1"), ("m2", "answer 2"), ("m3", "answer 3")]
    # Each message was answered knowing the ones before it, answers included.
    assert [r.user_texts for r in model.requests] == [
        ["message 1"],
        ["message 1", "message 2"],
        ["message 1", "message 2", "message 3"],
    ]
    assert [m.content for m in await repo.tail(ANN, 10)] == [
        "message 1",
        "answer 1",
        "message 2",
        "answer 2",
        "message 3",
        "answer 3",
    ]
    assert service.in_flight == 0


async def test_different_conversations_are_answered_side_by_side(
    service: ConversationService, model: ScriptedModel, repo: MemoryRepository
) -> None:
    held = asyncio.Event()
    model.script(Reply("Ann's answer", gate=held), "Bob's answer")
    ann = asyncio.create_task(turn(service, said(ANN, "Ann asks"), RecordingSink()))
    await model.wait_for_requests(1)
    # Ann's turn is stuck on the model; Bob is answered all the same.
    bob_sink = RecordingSink()
    async with asyncio.timeout(5):  # a failure detector: Bob must not wait for Ann
        await turn(service, said(BOB, "Bob asks"), bob_sink)
    assert bob_sink.replies == ["Bob's answer"]
    assert not ann.done()
    assert await repo.tail(ANN, 10) == []
    held.set()
    assert (await ann).reply == "Ann's answer"
    assert [m.content for m in await repo.tail(BOB, 10)] == ["Bob asks", "Bob's answer"]


async def test_exclusive_refuses_while_a_turn_runs(
    service: ConversationService, model: ScriptedModel
) -> None:
    gate = asyncio.Event()
    model.script(Reply("slow answer", gate=gate))
    running = asyncio.create_task(turn(service, said(ANN, "hi"), RecordingSink()))
    await model.wait_for_requests(1)
    with pytest.raises(ConversationBusy):
        async with service.exclusive(ANN):
            raise AssertionError("entered a busy conversation")
    # Another conversation is not busy.
    async with service.exclusive(BOB):
        assert service.in_flight == 2
    gate.set()
    await running
    async with service.exclusive(ANN):
        assert service.in_flight == 1
    assert service.in_flight == 0


async def test_wait_idle_returns_when_the_work_in_flight_ends(
    service: ConversationService, model: ScriptedModel
) -> None:
    assert await service.wait_idle(5) is True  # nothing in flight
    gate = asyncio.Event()
    model.script(Reply("first", gate=gate), "second")
    first = asyncio.create_task(turn(service, said(ANN, "one"), RecordingSink()))
    second = asyncio.create_task(turn(service, said(ANN, "two"), RecordingSink()))
    await model.wait_for_requests(1)
    await until(lambda: service.in_flight == 2, "both messages accepted")
    # A message still waiting for its turn counts too: shutdown must not cut it off.
    assert await service.wait_idle(0.01) is False
    waiting = asyncio.create_task(service.wait_idle(5))
    gate.set()
    assert await waiting is True
    assert first.done() and second.done()
    assert [(await first).reply, (await second).reply] == ["first", "second"]
    assert service.in_flight == 0


async def test_a_failed_turn_is_no_longer_in_flight(
    service: ConversationService, model: ScriptedModel
) -> None:
    model.script(ConnectionResetError("boom"))
    with pytest.raises(ConnectionResetError):
        await turn(service, said(ANN, "hi"), RecordingSink())
    assert service.in_flight == 0
    assert await service.wait_idle(5) is True
    async with service.exclusive(ANN):
        pass


# -- consultation commands --------------------------------------------------------------------


async def test_cancel_and_finish_outside_a_consultation_do_nothing(
    service: ConversationService, model: ScriptedModel, repo: MemoryRepository
) -> None:
    sink = RecordingSink()
    assert await service.cancel(ANN) is None
    assert await service.finish(said(ANN, "finish"), sink) is None
    model.script("Hello.")
    await service.say(said(ANN, "hi"), RecordingSink())
    assert await service.cancel(ANN) is None
    assert await service.finish(said(ANN, "finish"), sink) is None
    assert len(model.requests) == 1
    assert sink.answers == []
    assert [m.content for m in await repo.tail(ANN, 10)] == ["hi", "Hello."]
    assert await service.state(ANN) == ConversationState()


@pytest.mark.parametrize("rounds", [0, -1, MAX_ROUNDS + 1, 100])
async def test_consult_refuses_rounds_outside_the_limits(
    service: ConversationService, model: ScriptedModel, repo: MemoryRepository, rounds: int
) -> None:
    sink = RecordingSink()
    with pytest.raises(ValueError, match=f"1 to {MAX_ROUNDS}"):
        await service.consult(said(ANN, "plan my trip"), rounds, sink)
    assert model.requests == [] and sink.answers == []
    assert await repo.tail(ANN, 10) == []
    assert await service.state(ANN) == ConversationState()


@pytest.mark.parametrize(
    ("rounds", "expected"), [(None, CONSULT_ROUNDS), (1, 1), (MAX_ROUNDS, MAX_ROUNDS)]
)
async def test_consult_starts_a_consultation_of_the_rounds_asked(
    service: ConversationService, model: ScriptedModel, rounds: int | None, expected: int
) -> None:
    model.script("First question?")
    result = await service.consult(said(ANN, "plan my trip"), rounds, RecordingSink())
    assert result.plan is not None and result.plan.max_rounds == expected
    assert f"of {expected}" in model.requests[-1].system
    assert (await service.state(ANN)).consulting == (expected > 1)


async def test_finish_and_cancel_during_a_consultation(
    service: ConversationService, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script("How many days?", "Here is the plan.", "Budget?")
    await service.consult(said(ANN, "plan my trip"), 4, RecordingSink())
    result = await service.finish(said(ANN, "give me the answer now"), RecordingSink())
    assert result is not None and result.complete
    assert FINAL_NOTE.format(round=2, max_rounds=4, initial_request="plan my trip") in (
        model.requests[-1].system
    )
    assert not (await service.state(ANN)).consulting

    await service.consult(said(ANN, "choose a laptop"), None, RecordingSink())
    before = await service.cancel(ANN)
    assert before is not None
    assert (before.mode, before.round, before.max_rounds) == ("consultation", 1, CONSULT_ROUNDS)
    assert await service.state(ANN) == ConversationState()
    assert await service.cancel(ANN) is None
    # The cancelled consultation's messages stay in the history; the next one is plain chat.
    model.script("Hi!")
    after = await service.say(said(ANN, "hello"), RecordingSink())
    assert after.plan is None
    assert "Round" not in model.requests[-1].system


async def test_cancel_keeps_an_api_sessions_settings(
    service: ConversationService, model: ScriptedModel, repo: MemoryRepository
) -> None:
    session = SessionConfig(model="test/other", max_tokens=200)
    await repo.set_state(
        BOB,
        ConversationState(
            mode="consultation", round=1, max_rounds=3, initial_request="x", session=session
        ),
    )
    before = await service.cancel(BOB)
    assert before is not None and before.session == session
    assert await service.state(BOB) == ConversationState(session=session)


async def test_reset_forgets_a_consultation_in_progress(
    service: ConversationService, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script("How many days?")
    await service.consult(said(ANN, "plan my trip"), 3, RecordingSink())
    before = await service.reset(ANN)
    assert before.consulting and before.round == 1
    assert await service.state(ANN) == ConversationState()
    assert await repo.tail(ANN, 10) == []
