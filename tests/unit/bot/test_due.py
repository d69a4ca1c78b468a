"""A due task's turn in its chat (bot/due.py over core/timed.py): what the chat reads, what
the archive keeps, and where the task is afterwards. The firing is given to the door as the
runner gives it (MembotApp.feed, inside the chat's turn); the clock source that puts it is
tested in tests/unit/intake/test_due.py."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from membot.clock import utc_now
from membot.ids import ConversationId
from membot.llm.errors import LLMUnavailable
from membot.memory.contract.models import Message
from membot.memory.contract.state import ConversationState
from membot.schedule.models import Task, new_task_id
from tests.unit.bot.conftest import Door, OpenDoor

CHAT = 4242
USER = 4242


def _task(*, late: timedelta = timedelta(0), repeat: str | None = None, author: int = USER) -> Task:
    due = utc_now() - late
    local = due.astimezone(UTC).replace(tzinfo=None)
    return Task(
        id=new_task_id(),
        chat=CHAT,
        text="remind me to call the bank",
        due=due,
        zone="UTC",
        created=due - timedelta(hours=2),
        author=author,
        name="Anna",
        repeat=repeat,
        anchor=local.isoformat() if repeat else None,
    )


async def _fire(door: Door, task: Task) -> list[str]:
    """The task's firing fed to the door, as the runner feeds an update; what the chat read."""
    before = len(door.tg.messages_to(CHAT))
    await door.app.feed(json.dumps(task.firing.update()))
    return [m.text for m in door.tg.messages_to(CHAT)[before:]]


async def _archive(door: Door) -> list[Message]:
    return await door.repository.tail(ConversationId.telegram(CHAT), 50)


async def test_a_due_task_is_a_turn_whose_answer_reaches_the_chat_and_ends_a_one_off_task(
    door: Door,
) -> None:
    task = _task()
    assert await door.core.task_store.add(task, 50)
    door.model.script("Time to call the bank!")

    assert await _fire(door, task) == ["Time to call the bank!"]
    [request] = door.model.chat_requests
    assert "remind me to call the bank" in request.last["content"]
    question, answer = await _archive(door)
    assert (
        question.task == task.firing.key and "Task: remind me to call the bank" in question.content
    )
    assert question.user_id == USER and answer.content == "Time to call the bank!"
    assert await door.core.task_store.tasks(CHAT) == []


async def test_a_daily_task_moves_to_its_next_time_after_now(open_door: OpenDoor) -> None:
    door = await open_door(tasks_grace=30 * 86400)
    task = _task(late=timedelta(days=7, minutes=5), repeat="FREQ=DAILY")
    assert await door.core.task_store.add(task, 50)
    door.model.script("Good morning: call the bank.")

    await _fire(door, task)
    [moved] = await door.core.task_store.tasks(CHAT)
    now = utc_now()
    # A task missed for a week runs once, and its next time is the next one after now.
    assert now < moved.due <= now + timedelta(days=1)
    assert len(door.model.chat_requests) == 1


async def test_a_firing_given_twice_is_carried_out_once(door: Door) -> None:
    task = _task()
    assert await door.core.task_store.add(task, 50)
    door.model.script("Call the bank.")

    assert await _fire(door, task) == ["Call the bank."]
    assert await _fire(door, task) == []
    assert len(door.model.chat_requests) == 1


async def test_a_task_cancelled_before_its_turn_does_not_run(door: Door) -> None:
    task = _task()
    assert await door.core.task_store.add(task, 50)
    assert await door.core.task_store.remove(CHAT, task.id) is not None

    assert await _fire(door, task) == []
    assert door.model.chat_requests == []


async def test_a_turn_stored_before_a_crash_is_not_run_again(door: Door) -> None:
    # The process died after storing the task's turn and before moving the task on: the
    # archive says it ran; the task is moved on, and the model is not asked again.
    task = _task()
    assert await door.core.task_store.add(task, 50)
    cid = ConversationId.telegram(CHAT)
    await door.repository.append(
        cid,
        [
            Message(role="user", content="Task: ...", task=task.firing.key),
            Message("assistant", "Done."),
        ],
    )

    assert await _fire(door, task) == []
    assert door.model.chat_requests == []
    assert await door.core.task_store.tasks(CHAT) == []


async def test_a_task_later_than_the_grace_is_dropped_with_one_note(open_door: OpenDoor) -> None:
    door = await open_door(tasks_grace=3600)
    task = _task(late=timedelta(hours=2))
    assert await door.core.task_store.add(task, 50)

    [note] = await _fire(door, task)
    assert "dropped" in note and "remind me to call the bank" in note
    [entity] = door.tg.messages_to(CHAT)[-1].entities
    # The time it was due, shown to each reader in their own zone and locale.
    assert entity["type"] == "date_time" and entity["unix_time"] == int(task.due.timestamp())
    assert door.model.chat_requests == []
    assert await door.core.task_store.tasks(CHAT) == []


async def test_a_task_late_within_the_grace_runs_and_the_model_is_told_it_is_late(
    door: Door,
) -> None:
    task = _task(late=timedelta(hours=3))
    assert await door.core.task_store.add(task, 50)
    door.model.script("Sorry, a bit late: call the bank.")

    await _fire(door, task)
    [request] = door.model.chat_requests
    assert "late by 3 h" in request.last["content"]


async def test_an_author_over_budget_gets_one_line_instead_of_the_turn(
    open_door: OpenDoor,
) -> None:
    door = await open_door(user_daily_budget="0")
    task = _task()
    assert await door.core.task_store.add(task, 50)

    [line] = await _fire(door, task)
    assert "not carried out" in line and "daily budget" in line
    assert door.model.chat_requests == []
    assert await door.core.task_store.tasks(CHAT) == []


async def test_the_tasks_of_an_author_taken_off_the_allowlist_are_skipped(
    open_door: OpenDoor,
) -> None:
    door = await open_door(allowed_user_ids="1")
    task = _task()
    assert await door.core.task_store.add(task, 50)

    assert await _fire(door, task) == []
    assert door.model.chat_requests == []
    assert await door.core.task_store.tasks(CHAT) == []


async def test_a_model_that_fails_is_said_once_and_the_task_moves_on(door: Door) -> None:
    task = _task(repeat="FREQ=DAILY")
    assert await door.core.task_store.add(task, 50)
    door.model.script(LLMUnavailable("down"))

    [line] = await _fire(door, task)
    assert "not carried out" in line
    [moved] = await door.core.task_store.tasks(CHAT)
    assert moved.due > task.due
    assert await _archive(door) == []


async def test_a_task_set_in_a_forum_topic_is_answered_in_that_topic(door: Door) -> None:
    task = _task()
    task = replace(task, thread=77)
    assert await door.core.task_store.add(task, 50)
    door.model.script("Call the bank.")

    await _fire(door, task)
    [sent] = door.tg.messages_to(CHAT)
    assert str(sent.params.get("message_thread_id")) == "77"


def test_firing_update_ids_are_negative_and_stable() -> None:
    due = datetime(2026, 3, 28, 8, 0, tzinfo=UTC)
    a = Task(id="abcd1234", chat=CHAT, text="x", due=due, zone="UTC").firing
    b = Task(id="abcd1234", chat=CHAT, text="y", due=due, zone="UTC").firing
    assert a.update_id == b.update_id < 0
    assert (
        a.update_id
        != Task(
            id="abcd1234", chat=CHAT, text="x", due=due + timedelta(days=1), zone="UTC"
        ).firing.update_id
    )


async def test_a_daily_task_keeps_its_local_time_across_a_daylight_saving_change(
    open_door: OpenDoor,
) -> None:
    # 09:00 in Berlin on the Saturday before clocks go forward (CET, UTC+1), carried out on
    # time: its next time is 09:00 on Sunday, now CEST (UTC+2), 23 hours later.
    due = datetime(2026, 3, 28, 8, 0, tzinfo=UTC)
    door = await open_door(clock=lambda: due + timedelta(seconds=1))
    task = Task(
        id=new_task_id(),
        chat=CHAT,
        text="water the plants",
        due=due,
        zone="Europe/Berlin",
        author=USER,
        repeat="FREQ=DAILY",
        anchor="2026-03-28T09:00:00",
    )
    assert await door.core.task_store.add(task, 50)
    door.model.script("Water the plants.")

    assert await _fire(door, task) == ["Water the plants."]
    [moved] = await door.core.task_store.tasks(CHAT)
    assert moved.due == datetime(2026, 3, 29, 7, 0, tzinfo=UTC)
    [request] = door.model.chat_requests
    assert "2026-03-28 09:00 (Europe/Berlin)" in request.last["content"]


async def test_a_task_during_a_consultation_answers_no_round_and_leaves_it_going(
    door: Door,
) -> None:
    cid = ConversationId.telegram(CHAT)
    consulting = ConversationState(
        mode="consultation", round=1, max_rounds=3, initial_request="plan a trip", language="en"
    )
    await door.repository.set_state(cid, consulting)
    task = _task()
    assert await door.core.task_store.add(task, 50)
    door.model.script("Call the bank.")

    assert await _fire(door, task) == ["Call the bank."]  # no "Round 2 of 3" label
    [request] = door.model.chat_requests
    assert "start_consultation" not in request.tool_names
    state = (await door.repository.get_meta(cid)).state
    assert (state.mode, state.round, state.max_rounds) == ("consultation", 1, 3)


async def test_a_tasks_words_do_not_set_the_chats_language(door: Door) -> None:
    task = _task()
    assert await door.core.task_store.add(task, 50)
    door.model.script("Call the bank.")

    await _fire(door, task)
    meta = await door.repository.get_meta(ConversationId.telegram(CHAT))
    assert meta.state.language is None


async def test_a_chat_that_blocked_the_bot_loses_its_tasks(door: Door) -> None:
    task = _task(repeat="FREQ=DAILY")
    later = _task(late=-timedelta(days=2))
    assert await door.core.task_store.add(task, 50)
    assert await door.core.task_store.add(later, 50)
    door.model.script("Call the bank.")
    door.tg.fail_next("sendMessage", 403, "Forbidden: bot was blocked by the user", chat_id=CHAT)

    assert await _fire(door, task) == []
    # Each would cost its author a model call and reach nobody: they are gone.
    assert await door.core.task_store.tasks(CHAT) == []
