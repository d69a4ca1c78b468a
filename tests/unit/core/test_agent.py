"""The agent on its own: one turn with a scripted model, the in-memory backend and a sink
that is not Telegram. No network, no files: what a front door (Telegram, HTTP) relies on."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from membot.core.agent import Agent
from membot.core.consult import FINAL_NOTE, ROUND_NOTE
from membot.core.prompt import PromptBuilder
from membot.core.summarizer import Summarizer
from membot.core.tools.builtin import builtin
from membot.core.turn import Incoming, TurnOptions, TurnResult
from membot.ids import ConversationId
from membot.llm.errors import LLMInvalidOutput, LLMTimeout, LLMUnavailable
from membot.llm.model import CallOptions
from membot.llm.structured import OutputSpec
from membot.llm.tools import ToolExecutor, ToolModeName, make_mode
from membot.memory import ConversationState, MemoryRepository, Message, SessionConfig
from membot.tasks import TaskSupervisor
from membot.tool_names import BUILTIN_TOOL_NAMES, CONSULTATION_TOOL, TASK_TOOLS
from tests.scripted import MODEL, RecordingSink, Reply, ScriptedModel, hermes_call, tool_call

SYSTEM = "You are the test assistant."
SESSION = ConversationId.api(uuid.UUID("9b2f7a1c-3d4e-4f50-8a6b-7c8d9e0f1a2b"))
CHAT = ConversationId.telegram(-100777)
# An agent without a task desk (these) offers no task tools (tests/unit/core/test_task_offers.py).
CHAT_TOOLS = [name for name in BUILTIN_TOOL_NAMES if name not in TASK_TOOLS]
OTHER_TOOLS = [name for name in CHAT_TOOLS if name != CONSULTATION_TOOL]
# Quotes, braces and a line break: the final round must quote the request exactly as given.
REQUEST = 'Plan my "trip" to Kazan {3 days}\nwith a budget of 500 €'
# What the model passes to `start_consultation`: kept verbatim, line break included.
ASKED = REQUEST

MakeAgent = Callable[..., Agent]


def no_language(text: str) -> None:
    """A detector that never tells: the states these tests expect carry no language."""


@pytest.fixture
async def make_agent(model: ScriptedModel, repo: MemoryRepository) -> AsyncIterator[MakeAgent]:
    """An agent wired as `membot.wiring.build_agent` wires one, with test-sized settings."""
    agents: list[Agent] = []

    def make(
        *,
        mode: ToolModeName = "native",
        tools: tuple[str, ...] = BUILTIN_TOOL_NAMES,
        consult_rounds: int = 3,
        max_rounds: int = 6,
        summary_every: int = 1000,
        window_size: int = 20,
    ) -> Agent:
        registry = builtin.subset(tools)
        agent = Agent(
            model=model,
            repository=repo,
            prompts=PromptBuilder(SYSTEM),
            summarizer=Summarizer(model, repo, every=summary_every, window=window_size),
            window_size=window_size,
            tools=ToolExecutor(registry, timeout=5) if registry else None,
            tool_mode=make_mode(mode),
            max_tool_steps=4,
            tasks=TaskSupervisor(),
            consult_rounds=consult_rounds,
            max_rounds=max_rounds,
            detect=no_language,  # detection has its own tests: test_language.py
        )
        agents.append(agent)
        return agent

    yield make
    for agent in agents:
        await agent.aclose()


@pytest.fixture
def agent(make_agent: MakeAgent) -> Agent:
    return make_agent()


def said(text: str, cid: ConversationId = SESSION) -> Incoming:
    return Incoming(conversation=cid, text=text, user_id=7, name="Ann")


async def stored(repo: MemoryRepository, cid: ConversationId = SESSION) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in await repo.tail(cid, 100)]


async def state(repo: MemoryRepository, cid: ConversationId = SESSION) -> ConversationState:
    return (await repo.get_meta(cid)).state


def round_note(k: int, n: int) -> str:
    return ROUND_NOTE.format(round=k, max_rounds=n)


def final_note(k: int, n: int, request: str = REQUEST) -> str:
    return FINAL_NOTE.format(round=k, max_rounds=n, initial_request=request)


def consulting(k: int, n: int, request: str = REQUEST) -> ConversationState:
    return ConversationState(mode="consultation", round=k, max_rounds=n, initial_request=request)


def finished(k: int, n: int, request: str = REQUEST) -> ConversationState:
    return ConversationState(
        mode="chat", round=k, max_rounds=n, initial_request=request, complete=True
    )


# -- a plain turn ------------------------------------------------------------------------------


async def test_a_turn_is_stored_before_the_answer_goes_out(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    seen_at_answer: list[list[Message]] = []

    async def look(result: TurnResult) -> None:
        seen_at_answer.append(await repo.tail(CHAT, 10))

    model.script("Hello, Ann!")
    incoming = Incoming(
        conversation=CHAT, text="Hi there", user_id=7, name="Ann", message_id=31, group=True
    )
    sink = RecordingSink(on_answer=look)
    result = await agent.respond(incoming, sink)

    [at_answer] = seen_at_answer
    assert [(m.role, m.content) for m in at_answer] == [
        ("user", "Hi there"),
        ("assistant", "Hello, Ann!"),
    ]
    question = at_answer[0]
    assert (question.user_id, question.name, question.tg_message_id) == (7, "Ann", 31)
    assert sink.replies == ["Hello, Ann!"] and sink.progress_texts == []
    assert (result.reply, result.model, result.plan, result.complete) == (
        "Hello, Ann!",
        MODEL,
        None,
        True,
    )
    assert result.state == ConversationState()
    [request] = model.requests
    assert request.system.startswith(SYSTEM)
    assert request.last == {"role": "user", "content": "Ann: Hi there"}  # a group chat
    assert request.tool_names == CHAT_TOOLS
    assert (request.tool_choice, request.options) == (None, CallOptions())  # a plain call


async def test_the_next_turn_sees_the_previous_one(agent: Agent, model: ScriptedModel) -> None:
    model.script("Nice to meet you, Ann.", "You are Ann.")
    await agent.respond(said("My name is Ann"), RecordingSink())
    await agent.respond(said("What is my name?"), RecordingSink())
    second = model.requests[1]
    assert [(m["role"], m["content"]) for m in second.messages[1:]] == [
        ("user", "My name is Ann"),
        ("assistant", "Nice to meet you, Ann."),
        ("user", "What is my name?"),
    ]


async def test_an_llm_error_stores_nothing_and_changes_no_state(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script("How many days?")
    await agent.respond(said(REQUEST), RecordingSink(), TurnOptions(start=3))
    before = (await stored(repo), await state(repo))
    assert before[1] == consulting(1, 3)

    model.script(LLMTimeout("the model did not answer in time"))
    sink = RecordingSink()
    with pytest.raises(LLMTimeout):
        await agent.respond(said("three days"), sink)
    assert (await stored(repo), await state(repo)) == before
    assert sink.answers == []

    # The same message again is still round 2: the failed attempt used up nothing.
    model.script("And the budget?")
    result = await agent.respond(said("three days"), RecordingSink())
    assert round_note(2, 3) in model.requests[-1].system
    assert result.state == consulting(2, 3)


async def test_a_failure_after_a_tool_step_stores_none_of_the_turn(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script(
        Reply("Let me calculate.", tool_call("calculate", expression="6*7")),
        LLMUnavailable("the provider failed"),
    )
    sink = RecordingSink()
    with pytest.raises(LLMUnavailable):
        await agent.respond(said("what is 6*7?"), sink)
    assert sink.progress_texts == ["Let me calculate."]  # already shown, best effort
    assert sink.answers == []
    assert await stored(repo) == []
    assert await state(repo) == ConversationState()


async def test_a_lost_progress_note_does_not_cost_the_answer(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script(Reply("Let me calculate.", tool_call("calculate", expression="6*7")), "42.")
    sink = RecordingSink(fail_progress=True)
    result = await agent.respond(said("what is 6*7?"), sink)
    assert result.reply == "42."
    assert sink.replies == ["42."]
    assert [m.role for m in await repo.tail(SESSION, 10)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert model.requests[1].last["content"] == "42"  # the tool's result


# -- consultations started by the front door ----------------------------------------------------


async def test_a_consultation_of_three_rounds(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script("How many days?", "What is the budget?", "Here is your plan.", "You're welcome!")

    first = await agent.respond(said(REQUEST), RecordingSink(), TurnOptions(start=3))
    request = model.requests[-1]
    assert "Round 1 of 3" in request.system
    assert round_note(1, 3) in request.system
    assert "final round" not in request.system
    assert first.plan is not None and (first.plan.round, first.plan.final) == (1, False)
    assert not first.complete
    assert first.state == consulting(1, 3) == await state(repo)
    # No consultation within a consultation; every other tool is still there.
    assert request.tool_names == OTHER_TOOLS

    second = await agent.respond(said("three days"), RecordingSink())
    request = model.requests[-1]
    assert "Round 2 of 3" in request.system
    assert round_note(2, 3) in request.system
    assert "final round" not in request.system
    assert request.tool_names == OTHER_TOOLS
    assert second.state == consulting(2, 3) == await state(repo)

    third = await agent.respond(said("500 euro"), RecordingSink())
    request = model.requests[-1]
    assert final_note(3, 3) in request.system
    assert "IMPORTANT: This is the final round of the dialog (Round 3 of 3)." in request.system
    assert f'The user\'s initial request was: "{REQUEST}"' in request.system
    assert round_note(3, 3) not in request.system
    # The final answer is made from everything gathered: every round is in the prompt.
    assert request.user_texts == [REQUEST, "three days", "500 euro"]
    assert third.plan is not None and third.plan.final and third.complete
    assert third.state == finished(3, 3) == await state(repo)

    # Back to plain chat: no round note, and a new consultation can be started again.
    after = await agent.respond(said("thanks!"), RecordingSink())
    request = model.requests[-1]
    assert "Round" not in request.system and "final round" not in request.system
    assert request.tool_names == CHAT_TOOLS
    assert after.plan is None
    assert await state(repo) == finished(3, 3)
    assert [text for role, text in await stored(repo) if role == "assistant"] == [
        "How many days?",
        "What is the budget?",
        "Here is your plan.",
        "You're welcome!",
    ]


async def test_finish_makes_the_current_round_the_final_one(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script("How many days?", "Here is your plan.")
    await agent.respond(said(REQUEST), RecordingSink(), TurnOptions(start=5))
    result = await agent.respond(said("just answer now"), RecordingSink(), TurnOptions(finish=True))
    assert final_note(2, 5) in model.requests[-1].system
    assert result.plan is not None and (result.plan.round, result.plan.final) == (2, True)
    assert await state(repo) == finished(2, 5)


async def test_a_consultation_of_one_round_is_final_at_once(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script("Here is your plan.")
    result = await agent.respond(said(REQUEST), RecordingSink(), TurnOptions(start=1))
    request = model.requests[-1]
    assert final_note(1, 1) in request.system
    assert round_note(1, 1) not in request.system
    assert result.complete
    assert await state(repo) == finished(1, 1)


async def test_finish_outside_a_consultation_is_a_plain_turn(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script("Hello.")
    result = await agent.respond(said("hi"), RecordingSink(), TurnOptions(finish=True))
    assert result.plan is None
    assert "final round" not in model.requests[-1].system
    assert await state(repo) == ConversationState()


# -- consultations started by the model -----------------------------------------------------------


async def test_the_model_starts_a_consultation_with_the_tool(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script(
        Reply(
            "A few questions first.",
            tool_call(CONSULTATION_TOOL, "call_c1", request=ASKED, rounds=4),
        ),
        "How many days?",
    )
    sink = RecordingSink()
    result = await agent.respond(said("help me plan a trip"), sink)

    offered, answered = model.requests
    assert CONSULTATION_TOOL in offered.tool_names
    assert "Round" not in offered.system
    # The same turn goes on in round 1, and cannot start another consultation.
    assert round_note(1, 4) in answered.system
    assert answered.tool_names == OTHER_TOOLS
    assert answered.messages[-2]["tool_calls"][0]["function"]["name"] == CONSULTATION_TOOL
    assert answered.last["role"] == "tool"
    assert answered.last["content"].startswith("Consultation started: 4 rounds.")

    assert sink.progress_texts == ["A few questions first."]
    assert sink.replies == ["How many days?"]
    assert result.plan is not None and (result.plan.round, result.plan.max_rounds) == (1, 4)
    assert result.state == consulting(1, 4, ASKED) == await state(repo)
    assert [m.role for m in await repo.tail(SESSION, 10)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]

    model.script("And the budget?")
    await agent.respond(said("three days"), RecordingSink())
    assert round_note(2, 4) in model.requests[-1].system
    assert await state(repo) == consulting(2, 4, ASKED)


@pytest.mark.parametrize(
    ("arguments", "rounds"),
    [({"rounds": 50}, 6), ({"rounds": 0}, 1), ({"rounds": -2}, 1), ({}, 3), ({"rounds": 6}, 6)],
    ids=["above-max", "zero", "negative", "default", "max"],
)
async def test_the_tool_keeps_rounds_within_limits(
    agent: Agent,
    model: ScriptedModel,
    repo: MemoryRepository,
    arguments: dict[str, Any],
    rounds: int,
) -> None:
    # consult_rounds=3, max_rounds=6 for this agent.
    model.script(tool_call(CONSULTATION_TOOL, request=ASKED, **arguments), "Answer.")
    result = await agent.respond(said("help me plan"), RecordingSink())
    assert result.plan is not None and result.plan.max_rounds == rounds
    if rounds == 1:
        assert final_note(1, 1, ASKED) in model.requests[-1].system
        assert result.complete and await state(repo) == finished(1, 1, ASKED)
    else:
        assert round_note(1, rounds) in model.requests[-1].system
        assert await state(repo) == consulting(1, rounds, ASKED)


async def test_the_model_starts_a_consultation_in_hermes_mode(
    make_agent: MakeAgent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    agent = make_agent(mode="hermes")
    model.script(
        "Let me ask first.\n" + hermes_call(CONSULTATION_TOOL, request=ASKED, rounds=2),
        "How many days?",
    )
    sink = RecordingSink()
    result = await agent.respond(said("help me plan a trip"), sink)

    offered, answered = model.requests
    assert offered.tools == answered.tools == []  # tools live in the prompt
    assert f'"name": "{CONSULTATION_TOOL}"' in offered.system
    assert CONSULTATION_TOOL not in answered.system
    assert '"name": "calculate"' in answered.system
    assert round_note(1, 2) in answered.system
    assert "<tool_response>" in answered.last["content"]
    assert sink.progress_texts == ["Let me ask first."]
    assert sink.replies == ["How many days?"]
    assert result.state == consulting(1, 2, ASKED) == await state(repo)


async def test_the_switch_is_committed_with_the_turn_only(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script(
        Reply("A few questions first.", tool_call(CONSULTATION_TOOL, request=ASKED)),
        LLMUnavailable("the provider failed"),
    )
    with pytest.raises(LLMUnavailable):
        await agent.respond(said("help me plan a trip"), RecordingSink())
    assert await state(repo) == ConversationState()
    assert await stored(repo) == []

    model.script("Sure, where to?")
    result = await agent.respond(said("help me plan a trip"), RecordingSink())
    request = model.requests[-1]
    assert "Round" not in request.system
    assert CONSULTATION_TOOL in request.tool_names
    assert result.plan is None and await state(repo) == ConversationState()


async def test_the_tool_is_not_offered_when_the_front_door_says_so(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script(tool_call(CONSULTATION_TOOL, request=ASKED), "Plain answer.")
    result = await agent.respond(
        said("help me plan a trip"), RecordingSink(), TurnOptions(consult_tool=False)
    )
    offered, answered = model.requests
    assert offered.tool_names == OTHER_TOOLS
    assert answered.last["content"].startswith(f"Unknown tool: {CONSULTATION_TOOL}.")
    assert result.plan is None and await state(repo) == ConversationState()


# -- output format -------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


async def test_a_valid_answer_is_stored_clean(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    spec = OutputSpec(SCHEMA)
    model.script('```json\n{"answer": "42"}\n```\n')
    sink = RecordingSink()
    result = await agent.respond(said("6*7?"), sink, TurnOptions(output=spec))
    assert result.reply == '{"answer": "42"}' == sink.replies[0]
    assert await stored(repo) == [("user", "6*7?"), ("assistant", '{"answer": "42"}')]
    [request] = model.requests
    assert request.response_format == spec.response_format()
    assert request.options.require_parameters


async def test_an_invalid_answer_gets_one_repair_request(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    spec = OutputSpec(SCHEMA)
    model.script('{"result": 42}', '{"answer": "42"}')
    options = TurnOptions(output=spec, call=CallOptions(model="test/json", max_tokens=100))
    result = await agent.respond(said("6*7?"), RecordingSink(), options)
    first, repair = model.requests
    assert repair.response_format == first.response_format == spec.response_format()
    assert (repair.options.model, repair.options.max_tokens) == ("test/json", 100)
    assert repair.messages[-2] == {"role": "assistant", "content": '{"result": 42}'}
    assert repair.last["role"] == "user"
    assert repair.last["content"].startswith("Your previous reply could not be used:")
    assert "answer" in repair.last["content"]
    assert result.reply == '{"answer": "42"}'
    # Only the usable answer is kept: the broken one and the repair request are not history.
    assert await stored(repo) == [("user", "6*7?"), ("assistant", '{"answer": "42"}')]


async def test_an_answer_invalid_twice_fails_the_turn(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script("It is 42.", '{"result": 42}')
    sink = RecordingSink()
    with pytest.raises(LLMInvalidOutput):
        await agent.respond(said("6*7?"), sink, TurnOptions(output=OutputSpec(SCHEMA)))
    assert len(model.requests) == 2
    assert sink.answers == []
    assert await stored(repo) == []
    assert await state(repo) == ConversationState()


async def test_only_the_answer_that_completes_a_consultation_has_the_format(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    spec = OutputSpec(SCHEMA)
    model.script("How many days?", '{"answer": "the plan"}')
    options = TurnOptions(output=spec)
    await agent.respond(said(REQUEST), RecordingSink(), TurnOptions(start=2, output=spec))
    result = await agent.respond(said("three days"), RecordingSink(), options)
    question, final = model.requests
    assert question.response_format is None
    assert final.response_format == spec.response_format()
    assert json.loads(result.reply) == {"answer": "the plan"}
    assert result.complete


async def test_an_answer_given_up_on_is_still_held_to_the_format(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    # Tool steps, then nothing: the fixed "could not finish" sentence is not JSON either.
    model.script(tool_call("calculate", expression="6*7"), "", '{"answer": "42"}')
    result = await agent.respond(
        said("6*7?"), RecordingSink(), TurnOptions(output=OutputSpec(SCHEMA))
    )
    assert json.loads(result.reply) == {"answer": "42"}
    assert model.requests[-1].last["content"].startswith("Your previous reply could not be used")


async def test_facts_of_a_failed_turn_are_not_kept(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script(
        tool_call("remember", fact="The user is a beginner"),
        LLMUnavailable("the provider failed"),
    )
    with pytest.raises(LLMUnavailable):
        await agent.respond(said("remember I'm a beginner"), RecordingSink())
    assert await repo.get_facts(SESSION) == []
    # A turn that goes through keeps them, and later calls of the turn already see them.
    model.script(
        tool_call("remember", fact="The user is a beginner"),
        tool_call("forget", fact="beginner"),
        tool_call("remember", fact="The user trains twice a week"),
        "Noted.",
    )
    await agent.respond(said("remember I'm a beginner"), RecordingSink())
    assert await repo.get_facts(SESSION) == ["The user trains twice a week"]


async def test_the_hermes_repair_request_does_not_contradict_the_format(
    make_agent: MakeAgent, model: ScriptedModel
) -> None:
    agent = make_agent(mode="hermes")
    model.script("It is 42.", '{"answer": "42"}')
    await agent.respond(said("6*7?"), RecordingSink(), TurnOptions(output=OutputSpec(SCHEMA)))
    repair = model.requests[-1].last["content"]
    assert "only a JSON object" in repair
    assert "plain text" not in repair


# -- API sessions and background work -----------------------------------------------------------


async def test_a_new_sessions_settings_are_kept_with_its_first_turn(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    session = ConversationState(
        session=SessionConfig(model="test/other", system_prompt="Be terse.")
    )
    model.script("Hi.", "Round one question?", "Hello again.")
    await agent.respond(
        said("hi"), RecordingSink(), TurnOptions(state=session, system_prompt="Be terse.")
    )
    assert model.requests[-1].system.startswith("Be terse.")
    assert await state(repo) == session
    # The session's settings outlive a consultation; a later `state` option changes nothing.
    await agent.respond(said(REQUEST), RecordingSink(), TurnOptions(start=2))
    assert (await state(repo)).session == session.session
    await agent.respond(said("hello"), RecordingSink(), TurnOptions(state=ConversationState()))
    assert (await state(repo)).session == session.session


async def test_the_summary_is_made_after_the_answer_in_the_background(
    make_agent: MakeAgent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    # 4 messages = WINDOW_SIZE + SUMMARY_EVERY: the oldest 2 are summarized, 2 stay in view.
    agent = make_agent(summary_every=2, window_size=2)
    order: list[str] = []

    async def answered(result: TurnResult) -> None:
        order.append(f"answer: {result.reply}")

    model.script("one", "two", "Ann said one.")
    await agent.respond(said("first"), RecordingSink(on_answer=answered))
    await agent.respond(said("second"), RecordingSink(on_answer=answered))
    await agent.tasks.join()
    assert [r.purpose for r in model.requests] == ["chat", "chat", "summary"]
    assert order == ["answer: one", "answer: two"]
    covered = model.requests[-1].messages[-1]["content"]
    assert "first" in covered and "second" not in covered
    assert await repo.get_summary(SESSION) == "Ann said one."
    assert (await repo.get_meta(SESSION)).summarized_upto == 2


async def test_reset_forgets_the_conversation_and_its_consultation(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script("How many days?", "Hello, who are you?")
    await agent.respond(said(REQUEST), RecordingSink(), TurnOptions(start=3))
    await agent.reset(SESSION)
    assert await stored(repo) == [] and await state(repo) == ConversationState()
    result = await agent.respond(said("hi"), RecordingSink())
    assert result.plan is None
    assert model.requests[-1].user_texts == ["hi"]
    assert "Round" not in model.requests[-1].system
