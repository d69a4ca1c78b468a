"""/timezone, /tasks and its Cancel buttons (bot/handlers/tasks.py), and /reset removing a
chat's tasks, fed to the dispatcher. Tasks are set as users set them: the model calls
schedule_task in a turn."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from membot.bot import texts
from membot.bot.times import DATE_TIME_FORMAT
from membot.ids import ConversationId
from membot.schedule.show import local_time
from tests.fakes import FakeTelegram, SentMessage, utf16_len
from tests.scripted import tool_call
from tests.unit.bot.conftest import Door, OpenDoor

CHAT = 7601
GROUP = -7600
EN, RU = texts.EN, texts.RU
ANN = {"user_id": 601, "first_name": "Ann"}
BOB = {"user_id": 602, "first_name": "Bob"}
ADA = {"user_id": 701, "first_name": "Ada"}  # the group's administrator
OWEN = {"user_id": 900, "first_name": "Owen"}  # ADMIN_USER_IDS


def day(ahead: int) -> date:
    return (datetime.now(UTC) + timedelta(days=ahead)).date()


def date_times(message: SentMessage) -> list[tuple[str, int]]:
    """The date_time entities of a message: (their text, their unix time)."""
    found = []
    units = message.text.encode("utf-16-le")
    for e in message.entities:
        if e["type"] == "date_time":
            assert e["date_time_format"] == DATE_TIME_FORMAT
            part = units[2 * e["offset"] : 2 * (e["offset"] + e["length"])].decode("utf-16-le")
            found.append((part, e["unix_time"]))
    return found


def buttons(tg: FakeTelegram, chat: int) -> list[tuple[str, str]]:
    markup = tg.messages_to(chat)[-1].params.get("reply_markup") or {"inline_keyboard": []}
    return [(b["text"], b["callback_data"]) for row in markup["inline_keyboard"] for b in row]


async def schedule(
    door: Door, chat: int, task: str, when: str, repeat: str | None = None, **user: Any
) -> str:
    """A user asks; the model schedules it. The task's id."""
    arguments = {"when": when, "task": task, **({"repeat": repeat} if repeat else {})}
    door.model.script(tool_call("schedule_task", **arguments), "Scheduled.")
    if chat < 0:
        await door.mention(chat, f"please: {task}", **user)
    else:
        await door.say(chat, f"please: {task}", **user)
    result = door.model.chat_requests[-1].messages[-1]["content"]
    return str(json.loads(result)["id"])


async def test_timezone_shows_sets_and_refuses(door: Door) -> None:
    before = int(datetime.now(UTC).timestamp())
    [shown] = await door.sent(CHAT, door.tg.push_text(CHAT, "/timezone"))
    [(text, unix)] = date_times(shown)
    assert before - 1 <= unix <= datetime.now(UTC).timestamp() + 1
    assert shown.text == EN.TIMEZONE_IS.format(zone="UTC", now=text)
    assert text == local_time(datetime.fromtimestamp(unix, UTC), ZoneInfo("UTC"))

    [done] = await door.sent(CHAT, door.tg.push_text(CHAT, "/timezone Europe/Berlin"))
    [(text, unix)] = date_times(done)
    assert done.text == EN.TIMEZONE_SET.format(zone="Europe/Berlin", now=text)
    assert text.endswith("(Europe/Berlin)")
    state = (await door.repository.get_meta(ConversationId.telegram(CHAT))).state
    assert state.timezone == "Europe/Berlin"

    assert await door.say(CHAT, "/timezone Mars/Olympus") == [
        EN.TIMEZONE_BAD.format(zone="Mars/Olympus")
    ]
    [shown] = await door.sent(CHAT, door.tg.push_text(CHAT, "/timezone"))
    assert shown.text.startswith("This chat's time zone: Europe/Berlin. It is ")
    # The model is told the chat's time in it.
    door.model.script("Hello.")
    await door.say(CHAT, "hi")
    assert "(Europe/Berlin, UTC+0" in (door.model.chat_requests[-1].now or "")


async def test_timezone_in_russian(door: Door) -> None:
    await door.say(CHAT, "/language ru")
    [done] = await door.sent(CHAT, door.tg.push_text(CHAT, "/timezone Asia/Tokyo"))
    [(text, _)] = date_times(done)
    assert done.text == RU.TIMEZONE_SET.format(zone="Asia/Tokyo", now=text)


async def test_in_groups_only_administrators_set_the_timezone(open_door: OpenDoor) -> None:
    door = await open_door(admin_user_ids="900")
    door.tg.set_admins(GROUP, [701])
    assert await door.say(GROUP, "/timezone Europe/Paris", **BOB) == [EN.ADMINS_ONLY]
    assert (await door.repository.get_meta(ConversationId.telegram(GROUP))).state.timezone is None
    [done] = await door.sent(GROUP, door.tg.push_text(GROUP, "/timezone Europe/Paris", **ADA))
    assert done.text.startswith("Done: this chat's time zone is now Europe/Paris.")
    [done] = await door.sent(GROUP, door.tg.push_text(GROUP, "/timezone Europe/Rome", **OWEN))
    assert done.text.startswith("Done: this chat's time zone is now Europe/Rome.")
    [shown] = await door.sent(GROUP, door.tg.push_text(GROUP, "/timezone", **BOB))  # anyone looks
    assert shown.text.startswith("This chat's time zone: Europe/Rome.")


async def test_tasks_without_tasks(door: Door) -> None:
    assert await door.say(CHAT, "/tasks") == [EN.NO_TASKS]
    assert buttons(door.tg, CHAT) == []
    await door.say(CHAT, "/language ru")
    assert await door.say(CHAT, "/tasks") == [RU.NO_TASKS]


async def test_tasks_lists_each_with_its_time_repeat_and_cancel_button(door: Door) -> None:
    await door.say(CHAT, "/timezone Asia/Tokyo")
    first = await schedule(door, CHAT, "call the bank", f"{day(2)}T09:00")
    daily = await schedule(door, CHAT, "water the plants", f"{day(1)}T20:00", "FREQ=DAILY")
    odd = await schedule(door, CHAT, "gym", f"{day(3)}T07:00", "FREQ=WEEKLY;BYDAY=MO,TH")
    [listing] = await door.sent(CHAT, door.tg.push_text(CHAT, "/tasks"))
    tokyo = ZoneInfo("Asia/Tokyo")
    tasks = await door.core.task_store.tasks(CHAT)
    assert [t.id for t in tasks][:2] == [daily, first] and odd in [t.id for t in tasks]
    shown = date_times(listing)
    assert shown == [(local_time(t.due, tokyo), int(t.due.timestamp())) for t in tasks]
    by_id = {t.id: t for t in tasks}
    assert listing.text.startswith(
        "Tasks in this chat (3):\n\n"
        f"1. water the plants\n{local_time(by_id[daily].due, tokyo)} · every day\n\n"
        f"2. call the bank\n{local_time(by_id[first].due, tokyo)} · once\n\n"
    )
    assert "repeats: FREQ=WEEKLY;BYDAY=MO,TH" in listing.text
    assert "set by" not in listing.text  # a private chat: all the user's own
    assert buttons(door.tg, CHAT) == [
        ("✕ Cancel 1", f"task:{daily}"),
        ("✕ Cancel 2", f"task:{first}"),
        ("✕ Cancel 3", f"task:{tasks[2].id}"),
    ]


async def test_cancel_by_its_author_updates_the_list(door: Door) -> None:
    task = await schedule(door, CHAT, "call the bank", f"{day(2)}T09:00")
    [listing] = await door.sent(CHAT, door.tg.push_text(CHAT, "/tasks"))
    answer = await door.press(CHAT, listing.message_id, f"task:{task}")
    assert answer["text"] == EN.TASK_CANCELLED.format(text="call the bank")
    assert await door.core.task_store.tasks(CHAT) == []
    assert door.tg.edits[-1]["text"] == EN.NO_TASKS
    # Pressed again (the list had not been updated yet): no longer there.
    answer = await door.press(CHAT, listing.message_id, f"task:{task}")
    assert answer["text"] == EN.TASK_GONE
    # Not a button of ours: answered, nothing done.
    answer = await door.press(CHAT, listing.message_id, "task:../../etc")
    assert "text" not in answer


async def test_in_a_group_only_the_author_or_an_admin_cancels(open_door: OpenDoor) -> None:
    door = await open_door(admin_user_ids="900")
    door.tg.set_admins(GROUP, [701])
    ann = await schedule(door, GROUP, "standup notes", f"{day(2)}T09:00", **ANN)
    bob = await schedule(door, GROUP, "order lunch", f"{day(3)}T12:00", **BOB)
    # Anyone looks; the list goes to the one who asked only (an ephemeral message).
    [listing] = await door.sent(GROUP, door.tg.push_text(GROUP, "/tasks", **BOB))
    assert listing.receiver_user_id == BOB["user_id"]
    assert "standup notes" in listing.text and "set by Ann" in listing.text
    assert "set by Bob" in listing.text
    answer = await door.press_ephemeral(GROUP, listing, f"task:{ann}", BOB["user_id"])
    assert answer["text"] == EN.TASK_NOT_YOURS
    assert str(answer.get("show_alert")).lower() == "true"
    assert len(await door.core.task_store.tasks(GROUP)) == 2
    # The author cancels theirs; the list is shown again without it.
    answer = await door.press_ephemeral(GROUP, listing, f"task:{bob}", BOB["user_id"])
    assert answer["text"] == EN.TASK_CANCELLED.format(text="order lunch")
    assert listing.ephemeral_message_id is not None
    edited = door.tg.ephemeral_message(GROUP, listing.ephemeral_message_id)["text"]
    assert "order lunch" not in edited and "standup notes" in edited
    # The group's administrator cancels Ann's, from the list they asked for.
    [listing] = await door.sent(GROUP, door.tg.push_text(GROUP, "/tasks", **ADA))
    answer = await door.press_ephemeral(GROUP, listing, f"task:{ann}", ADA["user_id"])
    assert answer["text"] == EN.TASK_CANCELLED.format(text="standup notes")
    assert await door.core.task_store.tasks(GROUP) == []
    # ADMIN_USER_IDS may too.
    again = await schedule(door, GROUP, "standup notes", f"{day(2)}T09:00", **ANN)
    [listing] = await door.sent(GROUP, door.tg.push_text(GROUP, "/tasks", **OWEN))
    answer = await door.press_ephemeral(GROUP, listing, f"task:{again}", OWEN["user_id"])
    assert answer["text"] == EN.TASK_CANCELLED.format(text="standup notes")


async def test_a_task_set_in_a_forum_topic_keeps_its_topic(door: Door) -> None:
    await schedule(door, GROUP, "standup", f"{day(2)}T09:00", thread_id=77, **ANN)
    [task] = await door.core.task_store.tasks(GROUP)
    assert (task.thread, task.author, task.name) == (77, 601, "Ann")


async def test_reset_removes_the_chats_tasks(door: Door) -> None:
    await schedule(door, CHAT, "call the bank", f"{day(2)}T09:00")
    await schedule(door, CHAT + 1, "elsewhere", f"{day(2)}T09:00")
    assert await door.say(CHAT, "/reset") == [EN.RESET_DONE]
    assert await door.say(CHAT, "/tasks") == [EN.NO_TASKS]
    assert await door.core.task_store.tasks(CHAT) == []
    assert len(await door.core.task_store.tasks(CHAT + 1)) == 1  # another chat's stay


async def test_help_lists_tasks_and_timezone_in_every_language(door: Door) -> None:
    for words in texts.BY_LANGUAGE.values():
        listed = [name for name, _ in words.COMMANDS]
        assert {"tasks", "timezone"} <= set(listed)
        assert [c for c in listed if c != "start" and f"/{c}" not in words.HELP] == []
    assert utf16_len(EN.TASK_CANCEL_BUTTON.format(n=20)) < 64
