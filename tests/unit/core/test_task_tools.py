"""The task tools (core/tools/tasks.py) on the in-memory task store with a clock moved by
hand: what the model gets back, what is scheduled, and what is refused (with nothing
scheduled); set_timezone writes with the turn's state."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from membot.config import TaskSettings
from membot.core.plan import TurnPlan
from membot.core.tools.book import TaskBook, TaskDesk
from membot.core.tools.builtin import builtin
from membot.core.tools.context import TurnContext
from membot.core.turn import Incoming
from membot.ids import ConversationId
from membot.llm.tools import ToolCall, ToolExecutor
from membot.memory import ConversationState, MemoryRepository
from membot.schedule.inmemory import InMemoryTaskStore
from membot.schedule.models import Task
from membot.tool_names import BUILTIN_TOOL_NAMES, TASK_TOOLS

CHAT = ConversationId.telegram(7)
GROUP = ConversationId.telegram(-100)
# Saturday 14 March 2026, 12:00 UTC (13:00 in Berlin, 21:00 in Tokyo).
NOW = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
OPTIONS = TaskSettings(
    enabled=True, timezone="UTC", min_interval=900, max_per_chat=3, grace=86_400.0
)
ANN, BOB, OWNER = 501, 502, 900


class Clock:
    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def store() -> InMemoryTaskStore:
    return InMemoryTaskStore()


def book_for(
    store: InMemoryTaskStore,
    *,
    cid: ConversationId = CHAT,
    user: int = ANN,
    name: str = "Ann",
    zone: str | None = None,
    options: TaskSettings = OPTIONS,
    plan: TurnPlan | None = None,
    thread: int | None = None,
) -> TaskBook:
    desk = TaskDesk(store, options, admins=frozenset({OWNER}), clock=Clock())
    incoming = Incoming(
        conversation=cid,
        text="",
        user_id=user,
        name=name,
        group=cid.key.startswith("-"),
        thread=thread,
    )
    book = desk.for_turn(incoming, plan or TurnPlan(ConversationState(timezone=zone)))
    assert book is not None
    return book


async def call(book: TaskBook, name: str, **arguments: object) -> str:
    """One call as the model makes it (through the executor: arguments checked first)."""
    ctx = TurnContext(
        conversation=ConversationId.telegram(book.chat), repository=MemoryRepository(), tasks=book
    )
    [result] = await ToolExecutor(builtin, timeout=5).run(
        [ToolCall(id="c1", name=name, arguments=json.dumps(arguments))], ctx
    )
    return result.content


def test_the_task_tools_are_built_ins_under_their_names() -> None:
    assert [n for n in builtin.names() if n in TASK_TOOLS] == list(TASK_TOOLS)
    assert set(TASK_TOOLS) <= set(BUILTIN_TOOL_NAMES)


async def test_a_time_without_offset_is_in_the_chats_zone(store: InMemoryTaskStore) -> None:
    book = book_for(store, zone="Asia/Tokyo", thread=55)
    result = json.loads(
        await call(book, "schedule_task", when="2026-03-15T09:00", task="call the bank")
    )
    assert result["next_local"] == "2026-03-15T09:00:00+09:00"
    assert result["next_utc"] == "2026-03-15T00:00:00.000Z"
    [task] = await store.tasks(7)
    assert task.id == result["id"] and task.text == "call the bank"
    assert task.due == datetime(2026, 3, 15, 0, 0, tzinfo=UTC)
    assert (task.zone, task.anchor, task.repeat) == ("Asia/Tokyo", "2026-03-15T09:00:00", None)
    assert (task.author, task.name, task.thread, task.created) == (ANN, "Ann", 55, NOW)


async def test_an_absolute_time_and_a_repeating_task(store: InMemoryTaskStore) -> None:
    book = book_for(store, zone="Europe/Berlin")
    result = json.loads(
        await call(
            book, "schedule_task", when="2026-03-15T07:30Z", task="weather", repeat="FREQ=DAILY"
        )
    )
    assert result["next_local"] == "2026-03-15T08:30:00+01:00"
    [task] = await store.tasks(7)
    assert (task.repeat, task.anchor, task.zone) == (
        "FREQ=DAILY",
        "2026-03-15T08:30:00",
        "Europe/Berlin",
    )


async def test_a_repeating_task_with_a_fraction_of_a_second_starts_at_its_when(
    store: InMemoryTaskStore,
) -> None:
    # A rule's times are whole seconds: 09:00:00.5 is 09:00 today, not tomorrow's 09:00.
    book = book_for(store)
    result = json.loads(
        await call(
            book,
            "schedule_task",
            when="2026-03-15T09:00:00.500",
            task="weather",
            repeat="FREQ=DAILY",
        )
    )
    assert result["next_utc"] == "2026-03-15T09:00:00.000Z"
    [task] = await store.tasks(7)
    assert task.due == datetime(2026, 3, 15, 9, 0, tzinfo=UTC)


async def test_a_weekly_rule_starts_at_its_own_first_time(store: InMemoryTaskStore) -> None:
    # From Sunday the 15th, a rule on Mondays and Thursdays first runs on Monday the 16th.
    book = book_for(store)
    result = json.loads(
        await call(
            book,
            "schedule_task",
            when="2026-03-15T09:00",
            task="gym",
            repeat="RRULE:FREQ=WEEKLY;BYDAY=MO,TH",
        )
    )
    assert result["next_utc"] == "2026-03-16T09:00:00.000Z"
    [task] = await store.tasks(7)
    assert task.repeat == "FREQ=WEEKLY;BYDAY=MO,TH"


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"when": "tomorrow at nine"}, "is not an ISO 8601 date-time"),
        ({"when": "2026-02-30T09:00"}, "is not an ISO 8601 date-time"),
        ({"when": "2026-03-15"}, "has no time of day"),
        ({"when": "2026-03-14T11:00Z"}, "is in the past"),
        ({"when": "2026-03-15T09:00", "repeat": "FREQ=SOMETIMES"}, "does not parse"),
        (
            {"when": "2026-03-15T09:00", "repeat": "FREQ=MINUTELY;INTERVAL=5"},
            "at most once every 15 minutes",
        ),
        (
            {"when": "2026-03-15T09:00", "repeat": "FREQ=DAILY;UNTIL=20260301T000000Z"},
            "has no time after",
        ),
    ],
)
async def test_a_bad_schedule_is_an_error_that_says_which_and_schedules_nothing(
    store: InMemoryTaskStore, arguments: dict[str, str], said: str
) -> None:
    result = await call(book_for(store), "schedule_task", task="x", **arguments)
    assert result.startswith("Error: ") and said in result
    assert await store.tasks(7) == []


async def test_a_time_the_clocks_skip_is_refused(store: InMemoryTaskStore) -> None:
    book = book_for(store, zone="Europe/Berlin")
    result = await call(book, "schedule_task", when="2026-03-29T02:30", task="x")
    assert "does not exist in Europe/Berlin" in result
    assert await store.tasks(7) == []


async def test_no_more_than_the_chats_limit(store: InMemoryTaskStore) -> None:
    book = book_for(store)
    for n in range(3):
        await call(book, "schedule_task", when=f"2026-03-1{5 + n}T09:00", task=f"task {n}")
    result = await call(book, "schedule_task", when="2026-03-20T09:00", task="one too many")
    assert result == (
        "Error: this chat has 3 scheduled tasks, the most it may have: cancel one first "
        "(list_tasks shows them)"
    )
    assert [t.text for t in await store.tasks(7)] == ["task 0", "task 1", "task 2"]


async def test_list_tasks_shows_ids_times_and_repeats(store: InMemoryTaskStore) -> None:
    book = book_for(store, zone="Europe/Berlin")
    assert json.loads(await call(book, "list_tasks"))["tasks"] == []
    first = json.loads(await call(book, "schedule_task", when="2026-03-16T09:00", task="b"))
    second = json.loads(
        await call(book, "schedule_task", when="2026-03-15T08:00", task="a", repeat="FREQ=WEEKLY")
    )
    listed = json.loads(await call(book, "list_tasks"))
    assert listed["time_zone"] == "Europe/Berlin"
    assert listed["now"] == "Saturday, 2026-03-14 13:00 (Europe/Berlin, UTC+01:00)"
    assert [
        (t["id"], t["task"], t["next_local"], t["repeat"], t["set_by"]) for t in listed["tasks"]
    ] == [
        (second["id"], "a", "2026-03-15T08:00:00+01:00", "FREQ=WEEKLY", "Ann"),
        (first["id"], "b", "2026-03-16T09:00:00+01:00", None, "Ann"),
    ]


async def test_cancel_in_a_private_chat(store: InMemoryTaskStore) -> None:
    book = book_for(store)
    made = json.loads(
        await call(book, "schedule_task", when="2026-03-16T09:00", task="call the bank")
    )
    assert await call(book, "cancel_task", id="nonsense!") == (
        "Error: 'nonsense!' is not a task id (list_tasks shows them)"
    )
    assert await call(book, "cancel_task", id="abcd1234") == (
        "Error: there is no task abcd1234 in this chat (list_tasks shows them)"
    )
    assert await call(book, "cancel_task", id=made["id"].upper()) == (
        f"Cancelled task {made['id']}: call the bank"
    )
    assert await store.tasks(7) == []


async def test_in_a_group_only_the_author_or_an_admin_cancels(store: InMemoryTaskStore) -> None:
    ann = book_for(store, cid=GROUP, user=ANN, name="Ann")
    made = json.loads(await call(ann, "schedule_task", when="2026-03-16T09:00", task="standup"))
    bob = book_for(store, cid=GROUP, user=BOB, name="Bob")
    assert await call(bob, "cancel_task", id=made["id"]) == (
        "Error: only the task's author (Ann) or an administrator may cancel it"
    )
    assert len(await store.tasks(-100)) == 1
    assert (await call(ann, "cancel_task", id=made["id"])).startswith("Cancelled task")
    again = json.loads(await call(ann, "schedule_task", when="2026-03-16T09:00", task="standup"))
    owner = book_for(store, cid=GROUP, user=OWNER, name="Owen")  # ADMIN_USER_IDS
    assert (await call(owner, "cancel_task", id=again["id"])).startswith("Cancelled task")
    assert await store.tasks(-100) == []


async def test_set_timezone_goes_into_the_turns_state(store: InMemoryTaskStore) -> None:
    plan = TurnPlan(ConversationState(language="en"))
    book = book_for(store, plan=plan)
    assert await call(book, "set_timezone", zone="Mars/Olympus") == (
        "Error: unknown time zone 'Mars/Olympus': use an IANA name such as Europe/Berlin or UTC"
    )
    assert plan.state_after() is None  # nothing to store yet
    said = await call(book, "set_timezone", zone="Asia/Tokyo")
    assert said == (
        "The chat's time zone is now Asia/Tokyo: it is Saturday, 2026-03-14 21:00 "
        "(Asia/Tokyo, UTC+09:00)."
    )
    # Stored with the turn (its state, not a write of its own), and used at once.
    assert plan.state_after() == ConversationState(language="en", timezone="Asia/Tokyo")
    result = json.loads(await call(book, "schedule_task", when="2026-03-15T09:00", task="x"))
    assert result["next_utc"] == "2026-03-15T00:00:00.000Z"


async def test_set_timezone_in_a_turn_that_stores_no_state_says_so(
    store: InMemoryTaskStore,
) -> None:
    plan = TurnPlan(ConversationState(), keep=False)
    said = await call(book_for(store, plan=plan), "set_timezone", zone="UTC")
    assert said.endswith("(for this message only: it cannot be saved right now)")
    assert plan.state_after() is None


async def test_in_a_group_only_an_admin_sets_the_timezone(store: InMemoryTaskStore) -> None:
    plan = TurnPlan(ConversationState())
    said = await call(book_for(store, cid=GROUP, user=BOB, plan=plan), "set_timezone", zone="UTC")
    assert (
        said == "Error: in a group only its administrators set the chat's time zone, with /timezone"
    )
    assert plan.state_after() is None
    await call(
        book_for(store, cid=GROUP, user=OWNER, plan=plan), "set_timezone", zone="Europe/Paris"
    )
    assert plan.state_after() == ConversationState(timezone="Europe/Paris")


def test_a_book_only_for_telegram_chats_with_tasks_on(store: InMemoryTaskStore) -> None:
    desk = TaskDesk(store, OPTIONS)
    plan = TurnPlan(ConversationState())
    api = ConversationId.api("0f8fad5b-d9cb-469f-a165-70867728950e")
    assert desk.for_turn(Incoming(conversation=api, text=""), plan) is None
    off = TaskDesk(
        store,
        TaskSettings(enabled=False, timezone="UTC", min_interval=900, max_per_chat=3, grace=1.0),
    )
    assert off.for_turn(Incoming(conversation=CHAT, text=""), plan) is None
    # A zone the system no longer knows falls back to TIMEZONE.
    book = desk.for_turn(
        Incoming(conversation=CHAT, text=""), TurnPlan(ConversationState(timezone="Gone/Away"))
    )
    assert book is not None and book.zone == ZoneInfo("UTC")


async def test_the_task_tools_refuse_where_no_book_is_open() -> None:
    ctx = TurnContext(conversation=CHAT, repository=MemoryRepository())
    [result] = await ToolExecutor(builtin, timeout=5).run(
        [ToolCall(id="c", name="list_tasks", arguments="{}")], ctx
    )
    assert result.content == "Error: tasks cannot be scheduled in this conversation"


async def test_a_task_of_the_past_store_is_listed_in_the_chats_zone(
    store: InMemoryTaskStore,
) -> None:
    # Set while the chat was in another zone: shown in the chat's zone now.
    await store.add(
        Task(id="abcd1234", chat=7, text="t", due=NOW + timedelta(hours=1), zone="Asia/Tokyo"), 10
    )
    listed = json.loads(await call(book_for(store, zone="Europe/Berlin"), "list_tasks"))
    assert listed["tasks"][0]["next_local"] == "2026-03-14T14:00:00+01:00"
