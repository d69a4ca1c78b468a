"""/consult, /finish and /cancel (bot/handlers/consult.py), fed to the dispatcher: the
refusals, the rounds' labels, and a consultation ended by /cancel or /reset."""

from __future__ import annotations

from membot.bot import texts
from tests.unit.bot.conftest import Door, OpenDoor

CHAT = 7201
REQUEST = "help me plan my week"
EN = texts.EN


def label(k: int, n: int, *, final: bool = False) -> str:
    # The labels are Markdown (italics); the user reads the text without the marks.
    template = EN.ROUND_FINAL if final else EN.ROUND
    return "\n\n" + template.format(round=k, max_rounds=n).strip("_")


async def test_refusals_of_bad_commands(open_door: OpenDoor) -> None:
    door = await open_door(consult_rounds=2, max_rounds=4)
    assert await door.say(CHAT, "/consult") == [EN.CONSULT_USAGE.format(rounds=2)]
    assert await door.say(CHAT, "/consult 5 too many") == [
        EN.CONSULT_BAD_ROUNDS.format(max_rounds=4)
    ]
    assert await door.say(CHAT, "/consult 0 none") == [EN.CONSULT_BAD_ROUNDS.format(max_rounds=4)]
    assert await door.say(CHAT, "/finish") == [EN.NOT_CONSULTING]
    assert await door.say(CHAT, "/cancel") == [EN.NOT_CONSULTING]
    assert door.model.requests == []


async def test_rounds_are_labelled_and_the_last_is_final(open_door: OpenDoor) -> None:
    door = await open_door(consult_rounds=2)
    door.model.script("Which days are busy?", "Then rest on Sunday.")
    assert await door.say(CHAT, f"/consult {REQUEST}") == ["Which days are busy?" + label(1, 2)]
    assert door.model.chat_requests[0].user_texts == [REQUEST]  # without the command
    assert await door.say(CHAT, "/consult another") == [
        EN.CONSULT_IN_PROGRESS.format(round=2, max_rounds=2)
    ]
    assert await door.say(CHAT, "all but Sunday") == [
        "Then rest on Sunday." + label(2, 2, final=True)
    ]
    assert await door.say(CHAT, "/finish") == [EN.NOT_CONSULTING]


async def test_finish_asks_for_the_final_answer(door: Door) -> None:
    door.model.script("Which days?", "Here is the plan.")
    await door.say(CHAT, f"/consult 5 {REQUEST}")
    assert await door.say(CHAT, "/finish") == ["Here is the plan." + label(2, 5, final=True)]
    assert door.model.chat_requests[-1].user_texts[-1] == EN.FINISH_REQUEST


async def test_cancel_and_reset_end_a_consultation_and_say_so(door: Door) -> None:
    door.model.script("Which days?")
    await door.say(CHAT, f"/consult 3 {REQUEST}")
    goes_on = "\n\n" + EN.CONSULT_GOES_ON.format(round=2, max_rounds=3)
    assert await door.say(CHAT, "/help") == [EN.HELP.format(rounds=3, max_rounds=10) + goes_on]
    assert await door.say(CHAT, "/cancel") == [EN.CONSULT_CANCELLED.format(round=2, max_rounds=3)]
    door.model.script("So.", "Which days?")
    assert await door.say(CHAT, "so?") == ["So."]  # no label: a plain chat again
    await door.say(CHAT, f"/consult 3 {REQUEST}")
    assert await door.say(CHAT, "/reset") == [EN.RESET_DONE + " " + EN.CONSULT_ENDED_BY_RESET]
