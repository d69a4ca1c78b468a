"""/model (by name and by its buttons), /persona and /usage (bot/handlers/chat_settings.py),
fed to the dispatcher."""

from __future__ import annotations

from decimal import Decimal

from membot.bot import texts
from membot.llm.model import LLMResponse, Usage
from tests.fakes import FakeTelegram
from tests.unit.bot.conftest import Door, OpenDoor

CHAT = 7101
GROUP = -7100
MODELS = "test/model,fast/small,smart/large"
EN = texts.EN


def buttons(tg: FakeTelegram, chat: int) -> list[tuple[str, str]]:
    markup = tg.messages_to(chat)[-1].params["reply_markup"]
    return [(b["text"], b["callback_data"]) for row in markup["inline_keyboard"] for b in row]


async def test_model_without_models_offers_no_choice(door: Door) -> None:
    assert await door.say(CHAT, "/model") == [EN.MODEL_ONLY.format(model="test/model")]
    assert "reply_markup" not in door.tg.messages_to(CHAT)[-1].params


async def test_model_buttons_choose_the_chats_model(open_door: OpenDoor) -> None:
    door = await open_door(models=MODELS)
    assert await door.say(CHAT, "/model") == [EN.MODEL_IS.format(model="test/model")]
    shown = buttons(door.tg, CHAT)
    assert [text for text, _ in shown] == ["✓ test/model", "fast/small", "smart/large"]
    keyboard = door.tg.messages_to(CHAT)[-1].message_id
    answer = await door.press(CHAT, keyboard, shown[2][1])
    assert answer["text"] == EN.MODEL_SET.format(model="smart/large")
    assert door.tg.edits[-1]["text"] == EN.MODEL_SET.format(model="smart/large")
    door.model.script("Hello.")
    assert await door.say(CHAT, "hello") == ["Hello."]
    assert door.model.chat_requests[-1].options.model == "smart/large"


async def test_the_same_button_twice_is_no_error(open_door: OpenDoor) -> None:
    door = await open_door(models=MODELS)
    await door.say(CHAT, "/model")
    keyboard, data = door.tg.messages_to(CHAT)[-1].message_id, buttons(door.tg, CHAT)[1][1]
    for _ in range(2):
        answer = await door.press(CHAT, keyboard, data)
        assert answer["text"] == EN.MODEL_SET.format(model="fast/small")
    # Telegram refused the second edit (nothing changed); the user got no apology.
    assert [m.text for m in door.tg.messages_to(CHAT)] == [EN.MODEL_IS.format(model="test/model")]


async def test_a_button_from_an_older_models_list_says_so(open_door: OpenDoor) -> None:
    door = await open_door(models="test/model,fast/small")
    await door.say(CHAT, "/model")
    keyboard = door.tg.messages_to(CHAT)[-1].message_id
    answer = await door.press(CHAT, keyboard, "model:2")  # smart/large, dropped since
    assert answer["text"] == EN.MODEL_GONE.format(choices="test/model, fast/small")


async def test_model_by_name_and_its_refusal(open_door: OpenDoor) -> None:
    door = await open_door(models=MODELS)
    assert await door.say(CHAT, "/model gpt/unknown") == [
        EN.MODEL_UNKNOWN.format(model="gpt/unknown", choices="test/model, fast/small, smart/large")
    ]
    assert await door.say(CHAT, "/model fast/small") == [EN.MODEL_SET.format(model="fast/small")]
    assert await door.say(CHAT, "/model") == [EN.MODEL_IS.format(model="fast/small")]
    assert [text for text, _ in buttons(door.tg, CHAT)][1] == "✓ fast/small"


async def test_in_groups_only_administrators_change_the_model(open_door: OpenDoor) -> None:
    door = await open_door(models=MODELS, admin_user_ids="900")
    door.tg.set_admins(GROUP, [700, 701])
    member = {"user_id": 555, "first_name": "Mel"}
    admin = {"user_id": 701, "first_name": "Ada"}
    owner = {"user_id": 900, "first_name": "Owen"}  # ADMIN_USER_IDS, no group admin
    assert await door.say(GROUP, "/model fast/small", **member) == [EN.ADMINS_ONLY]
    assert await door.say(GROUP, "/persona Be brief.", **member) == [EN.ADMINS_ONLY]
    assert await door.say(GROUP, "/model fast/small", **admin) == [
        EN.MODEL_SET.format(model="fast/small")
    ]
    assert await door.say(GROUP, "/model smart/large", **owner) == [
        EN.MODEL_SET.format(model="smart/large")
    ]
    assert door.tg.call_count("getChatAdministrators") == 1  # asked once, then cached
    await door.say(GROUP, "/model", **member)
    keyboard = door.tg.messages_to(GROUP)[-1].message_id
    answer = await door.press(GROUP, keyboard, buttons(door.tg, GROUP)[1][1], **member)
    assert answer["text"] == EN.ADMINS_ONLY
    assert str(answer.get("show_alert")).lower() == "true"  # an alert, not a passing note
    assert await door.say(GROUP, "/model", **member) == [EN.MODEL_IS.format(model="smart/large")]


async def test_persona_shown_set_refused_and_reset(door: Door) -> None:
    assert await door.say(CHAT, "/persona") == [EN.PERSONA_DEFAULT]
    persona = "You are a pirate."
    assert await door.say(CHAT, f"/persona {persona}") == [
        EN.PERSONA_SET.format(length=len(persona))
    ]
    assert await door.say(CHAT, "/persona") == [EN.PERSONA_IS.format(persona=persona)]
    door.model.script("Arr.")
    assert await door.say(CHAT, "hi") == ["Arr."]
    assert door.model.chat_requests[-1].system.startswith(persona)
    assert await door.say(CHAT, "/persona " + "x" * 4001) == [
        EN.PERSONA_TOO_LONG.format(limit=4000, length=4001)
    ]
    assert await door.say(CHAT, "/persona reset") == [EN.PERSONA_RESET]
    assert await door.say(CHAT, "/persona") == [EN.PERSONA_DEFAULT]


async def test_usage_before_and_after_an_answer(door: Door) -> None:
    nothing = EN.USAGE_YOURS.format(day=EN.USAGE_NONE, month=EN.USAGE_NONE)
    assert await door.say(CHAT, "/usage") == [nothing]
    usage = Usage(prompt_tokens=100, completion_tokens=20, cached_tokens=50, cost=Decimal("0.002"))
    door.model.script(LLMResponse("Sure.", model="test/model", finish_reason="stop", usage=usage))
    await door.say(CHAT, "count this")
    line = EN.USAGE_LINE.format(tokens=120, prompt=100, completion=20, cached=50, cost="0.002")
    assert await door.say(CHAT, "/usage") == [EN.USAGE_YOURS.format(day=line, month=line)]


async def test_usage_in_a_group_shows_the_chats_too(door: Door) -> None:
    nothing = EN.USAGE_NONE
    assert await door.say(GROUP, "/usage", user_id=555) == [
        EN.USAGE_YOURS.format(day=nothing, month=nothing)
        + "\n\n"
        + EN.USAGE_CHAT.format(day=nothing, month=nothing)
    ]
