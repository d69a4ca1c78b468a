"""Who is offered the task tools (core/offers.py): Telegram chats with TASKS on, native and
Hermes alike, never an HTTP API session; the system prompt says so in words that do not
change, and the chat's time goes with the new message (the head stays the same bytes for a
provider's prefix cache). The model's set_timezone is stored with the turn; a reset removes
the chat's tasks."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import pytest

from membot.config import TaskSettings
from membot.core.agent import Agent
from membot.core.prompt import NOW_NOTE, PromptBuilder
from membot.core.service import ConversationService
from membot.core.summarizer import Summarizer
from membot.core.tools.book import TaskDesk
from membot.core.tools.builtin import builtin
from membot.core.tools.tasks import TASKS_NOTE
from membot.core.turn import Incoming
from membot.ids import ConversationId
from membot.llm.cache import CACHE_MARK
from membot.llm.model import ChatMessage
from membot.llm.tools import ToolExecutor, make_mode
from membot.llm.tools.modes import ToolModeName
from membot.memory import MemoryRepository
from membot.schedule.inmemory import InMemoryTaskStore
from membot.tasks import TaskSupervisor
from membot.tool_names import BUILTIN_TOOL_NAMES, TASK_TOOLS
from tests.scripted import RecordingSink, ScriptedModel, hermes_call, tool_call

CHAT = ConversationId.telegram(4242)
SESSION = ConversationId.api(uuid.UUID("6f1c2d3e-4b5a-4c7d-9e8f-0a1b2c3d4e5f"))
NOW = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)  # a Saturday
OPTIONS = TaskSettings(
    enabled=True, timezone="Europe/Berlin", min_interval=900, max_per_chat=50, grace=86_400.0
)
NO_TASKS = [name for name in BUILTIN_TOOL_NAMES if name not in TASK_TOOLS]


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


MakeAgent = Callable[..., Agent]


def plain(messages: list[ChatMessage]) -> list[ChatMessage]:
    return [{k: v for k, v in m.items() if k != CACHE_MARK} for m in messages]


@pytest.fixture
async def make_agent(model: ScriptedModel, repo: MemoryRepository) -> AsyncIterator[MakeAgent]:
    made: list[Agent] = []

    def make(
        mode: ToolModeName = "native",
        options: TaskSettings = OPTIONS,
        store: InMemoryTaskStore | None = None,
        clock: Clock | None = None,
    ) -> Agent:
        agent = Agent(
            model=model,
            repository=repo,
            prompts=PromptBuilder("You are the test assistant."),
            summarizer=Summarizer(model, repo, every=1000),
            window_size=20,
            tools=ToolExecutor(builtin, timeout=5),
            tool_mode=make_mode(mode),
            tasks=TaskSupervisor(),
            detect=lambda text: None,
            task_desk=TaskDesk(store or InMemoryTaskStore(), options, clock=clock or Clock()),
        )
        made.append(agent)
        return agent

    yield make
    for agent in made:
        await agent.aclose()


def said(cid: ConversationId, text: str) -> Incoming:
    return Incoming(conversation=cid, text=text, user_id=7, name="Ann")


async def test_a_telegram_chat_is_offered_the_task_tools_an_api_session_is_not(
    make_agent: MakeAgent, model: ScriptedModel
) -> None:
    agent = make_agent()
    model.script("Sure.", "Sure.")
    await agent.respond(said(CHAT, "hello"), RecordingSink())
    await agent.respond(said(SESSION, "hello"), RecordingSink())
    chat, api = model.chat_requests
    assert chat.tool_names == list(BUILTIN_TOOL_NAMES)
    assert TASKS_NOTE in chat.system
    assert chat.now == NOW_NOTE.format(now="Saturday, 2026-03-14 13:00 (Europe/Berlin, UTC+01:00)")
    assert api.tool_names == NO_TASKS
    assert TASKS_NOTE not in api.system and api.now is None


async def test_with_tasks_off_no_turn_is_offered_them(
    make_agent: MakeAgent, model: ScriptedModel
) -> None:
    off = TaskSettings(enabled=False, timezone="UTC", min_interval=900, max_per_chat=5, grace=1.0)
    agent = make_agent(options=off)
    model.script("Sure.")
    await agent.respond(said(CHAT, "hello"), RecordingSink())
    [request] = model.chat_requests
    assert request.tool_names == NO_TASKS
    assert TASKS_NOTE not in request.system and request.now is None


async def test_hermes_lists_the_task_tools_in_telegram_only(
    make_agent: MakeAgent, model: ScriptedModel
) -> None:
    agent = make_agent(mode="hermes")
    model.script("Sure.", "Sure.")
    await agent.respond(said(CHAT, "hello"), RecordingSink())
    await agent.respond(said(SESSION, "hello"), RecordingSink())
    chat, api = model.chat_requests
    for name in TASK_TOOLS:
        assert f'"name": "{name}"' in chat.system
        assert f'"name": "{name}"' not in api.system
    assert TASKS_NOTE in chat.system and TASKS_NOTE not in api.system


@pytest.mark.parametrize("mode", ["native", "hermes"])
async def test_the_head_stays_the_same_bytes_while_the_time_moves_on(
    make_agent: MakeAgent, model: ScriptedModel, mode: ToolModeName
) -> None:
    clock = Clock()
    agent = make_agent(mode=mode, clock=clock)
    model.script("One.", "Two.")
    await agent.respond(said(CHAT, "first"), RecordingSink())
    clock.now += timedelta(hours=20, minutes=7)
    await agent.respond(said(CHAT, "second"), RecordingSink())
    first, second = model.chat_requests
    # The time is with the new message, never in the head: the head is the prefix cached.
    assert first.now is not None and "Saturday, 2026-03-14 13:00" in first.now
    assert second.now is not None and "Sunday, 2026-03-15 09:07" in second.now
    for request in (first, second):
        assert "13:00" not in request.system and "09:07" not in request.system
    # The earlier message is in the window as it was written, without its time.
    assert second.messages[1] == {"role": "user", "content": "first"}
    model.script("Three.")
    clock.now += timedelta(minutes=1)
    await agent.respond(said(CHAT, "third"), RecordingSink())
    third = model.chat_requests[-1]
    assert third.messages[0] == second.messages[0]  # byte-identical heads, turn to turn
    # What the second turn sent before its new message is where the third's starts.
    assert plain(third.messages[: len(second.messages) - 1]) == plain(second.messages[:-1])


async def test_the_models_set_timezone_is_stored_with_the_turn(
    make_agent: MakeAgent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    store = InMemoryTaskStore()
    agent = make_agent(store=store)
    model.script(
        tool_call("set_timezone", zone="Asia/Tokyo"),
        tool_call("schedule_task", when="2026-03-15T09:00", task="call the bank"),
        "Done: tomorrow at 9.",
    )
    result = await agent.respond(
        said(CHAT, "I'm in Tokyo; remind me at 9 tomorrow"), RecordingSink()
    )
    assert result.state.timezone == "Asia/Tokyo"
    assert (await repo.get_meta(CHAT)).state.timezone == "Asia/Tokyo"
    scheduled = json.loads(model.chat_requests[2].messages[-1]["content"])
    assert scheduled["next_local"] == "2026-03-15T09:00:00+09:00"
    [task] = await store.tasks(CHAT.chat_id)
    assert (task.zone, task.author, task.name) == ("Asia/Tokyo", 7, "Ann")
    model.script("Hi.")
    await agent.respond(said(CHAT, "hi"), RecordingSink())
    assert "(Asia/Tokyo, UTC+09:00)" in (model.chat_requests[-1].now or "")


async def test_hermes_schedules_alike(make_agent: MakeAgent, model: ScriptedModel) -> None:
    store = InMemoryTaskStore()
    agent = make_agent(mode="hermes", store=store)
    model.script(
        hermes_call(
            "schedule_task", when="2026-03-15T09:00", task="call the bank", repeat="FREQ=DAILY"
        ),
        "Every day at 9.",
    )
    await agent.respond(said(CHAT, "remind me daily at 9"), RecordingSink())
    [task] = await store.tasks(CHAT.chat_id)
    assert (task.text, task.repeat, task.zone) == ("call the bank", "FREQ=DAILY", "Europe/Berlin")
    assert task.due == datetime(2026, 3, 15, 8, 0, tzinfo=UTC)


async def test_an_api_session_cannot_call_them_either(
    make_agent: MakeAgent, model: ScriptedModel
) -> None:
    store = InMemoryTaskStore()
    agent = make_agent(store=store)
    model.script(tool_call("schedule_task", when="2026-03-15T09:00", task="x"), "Sorry.")
    await agent.respond(said(SESSION, "remind me"), RecordingSink())
    assert model.chat_requests[1].messages[-1]["content"].startswith("Unknown tool: schedule_task.")
    assert await store.chats() == []


async def test_a_reset_removes_the_chats_tasks(
    make_agent: MakeAgent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    store = InMemoryTaskStore()
    agent = make_agent(store=store)
    service = ConversationService(agent, repo, consult_rounds=3, max_rounds=5, task_store=store)
    other = ConversationId.telegram(4343)
    for cid in (CHAT, other):
        model.script(tool_call("schedule_task", when="2026-03-15T09:00", task="x"), "Done.")
        await service.say(said(cid, "remind me"), RecordingSink())
    await service.reset(CHAT)
    assert await store.tasks(CHAT.chat_id) == []
    assert len(await store.tasks(other.chat_id)) == 1
    await service.reset(SESSION)  # an API session has no tasks: nothing else goes
    assert len(await store.tasks(other.chat_id)) == 1
