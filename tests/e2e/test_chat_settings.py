"""A chat's own model and persona, end to end over the fakes: /model with its buttons and
by name, refusals, /persona in the prompt, admin-only changes in groups, and both kept with
the conversation across a restart (files and Redis) and cleared by /reset."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from membot.bot import texts
from membot.config import DEFAULT_SYSTEM_PROMPT
from membot.memory.redis import RedisRepository
from tests.conftest import StartBot
from tests.e2e.helpers import HELP_TEXT, system_prompt
from tests.e2e.test_redis_e2e import on_redis
from tests.fakes import FakeLLM, FakeTelegram

CHAT = 6006
GROUP = -6100
MODELS = "test/model,fast/small,smart/large"
EN = texts.EN


async def say(tg: FakeTelegram, chat: int, text: str, **kw: Any) -> str:
    before = len(tg.messages_to(chat))
    tg.push_text(chat, text, **kw)
    return (await tg.wait_for_messages(chat, before + 1))[before].text


def buttons(tg: FakeTelegram, chat: int) -> list[tuple[str, str]]:
    markup = tg.messages_to(chat)[-1].params["reply_markup"]
    return [(b["text"], b["callback_data"]) for row in markup["inline_keyboard"] for b in row]


async def test_model_buttons_choose_the_chats_model(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(models=MODELS)
    shown = await say(tg, CHAT, "/model")
    assert shown == EN.MODEL_IS.format(model="test/model")
    assert [text for text, _ in buttons(tg, CHAT)] == ["✓ test/model", "fast/small", "smart/large"]
    data = buttons(tg, CHAT)[2][1]
    tg.push_callback(CHAT, tg.messages_to(CHAT)[-1].message_id, data)
    await tg.wait_until(lambda: bool(tg.callback_answers and tg.edits), what="the button's answer")
    assert tg.callback_answers[-1]["text"] == EN.MODEL_SET.format(model="smart/large")
    assert tg.edits[-1]["text"] == EN.MODEL_SET.format(model="smart/large")
    await say(tg, CHAT, "hello")
    assert llm.chat_requests[-1]["model"] == "smart/large"


async def test_model_by_name_refusals_restart_and_reset(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    bot = await start_bot(models=MODELS)
    refused = await say(tg, CHAT, "/model gpt/unknown")
    assert refused == EN.MODEL_UNKNOWN.format(
        model="gpt/unknown", choices="test/model, fast/small, smart/large"
    )
    assert await say(tg, CHAT, "/model fast/small") == EN.MODEL_SET.format(model="fast/small")
    await bot.stop()
    await start_bot(models=MODELS)  # kept with the conversation
    await say(tg, CHAT, "one")
    assert llm.chat_requests[-1]["model"] == "fast/small"
    await say(tg, CHAT, "/reset")
    await say(tg, CHAT, "two")
    assert llm.chat_requests[-1]["model"] == "test/model"  # OPENROUTER_MODEL, the default


async def test_the_default_is_openrouter_model_or_the_first_of_models(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(models="fast/small,smart/large", openrouter_model=None)
    await say(tg, CHAT, "hi")
    assert llm.chat_requests[-1]["model"] == "fast/small"


async def test_persona_replaces_the_system_prompt_and_keeps_the_rest(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    assert await say(tg, CHAT, "/persona") == EN.PERSONA_DEFAULT
    await say(tg, CHAT, "first question")  # history the persona's prompt must still carry
    persona = "You are a pirate. Answer in pirate speak."
    assert await say(tg, CHAT, f"/persona {persona}") == EN.PERSONA_SET.format(length=len(persona))
    assert await say(tg, CHAT, "/persona") == EN.PERSONA_IS.format(persona=persona)
    await say(tg, CHAT, "second question")
    request = llm.chat_requests[-1]
    prompt = system_prompt(request)
    assert prompt.startswith(persona) and DEFAULT_SYSTEM_PROMPT not in prompt
    contents = [m.get("content") for m in request["messages"]]
    assert "first question" in contents  # the window is still there
    too_long = "x" * 4001
    assert await say(tg, CHAT, f"/persona {too_long}") == EN.PERSONA_TOO_LONG.format(
        limit=4000, length=4001
    )
    assert await say(tg, CHAT, "/persona reset") == EN.PERSONA_RESET
    await say(tg, CHAT, "third question")
    assert system_prompt(llm.chat_requests[-1]).startswith(DEFAULT_SYSTEM_PROMPT)


async def test_in_groups_only_administrators_change_model_and_persona(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(models=MODELS, admin_user_ids="900")
    tg.set_admins(GROUP, [700, 701])
    member = {"user_id": 555, "first_name": "Mel"}
    assert await say(tg, GROUP, "/model fast/small", **member) == EN.ADMINS_ONLY
    assert await say(tg, GROUP, "/persona Be brief.", **member) == EN.ADMINS_ONLY
    admin = {"user_id": 701, "first_name": "Ada"}
    assert await say(tg, GROUP, "/model fast/small", **admin) == EN.MODEL_SET.format(
        model="fast/small"
    )
    assert await say(tg, GROUP, "/persona Be brief.", **admin) == EN.PERSONA_SET.format(length=9)
    assert tg.call_count("getChatAdministrators") == 1  # asked once, then cached
    owner = {"user_id": 900, "first_name": "Owen"}  # ADMIN_USER_IDS, not a group admin
    assert await say(tg, GROUP, "/model smart/large", **owner) == EN.MODEL_SET.format(
        model="smart/large"
    )
    # A member pressing a /model button gets an alert, and nothing changes.
    await say(tg, GROUP, "/model", **member)
    markup_message = tg.messages_to(GROUP)[-1].message_id
    tg.push_callback(GROUP, markup_message, buttons(tg, GROUP)[1][1], **member)
    await tg.wait_until(lambda: bool(tg.callback_answers), what="the refusal")
    assert tg.callback_answers[-1]["text"] == EN.ADMINS_ONLY
    tg.push_mention(GROUP, "what now?", **member)
    await tg.wait_for_messages(GROUP, 7)
    assert llm.chat_requests[-1]["model"] == "smart/large"
    assert system_prompt(llm.chat_requests[-1]).startswith("Be brief.")


@pytest.mark.parametrize("backend", ["files", "redis"])
async def test_model_and_persona_survive_a_restart(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    redis_repo: RedisRepository,
    backend: str,
) -> None:
    storage = on_redis(redis_repo) if backend == "redis" else {}
    bot = await start_bot(models=MODELS, **storage)
    await say(tg, CHAT, "/model smart/large")
    await say(tg, CHAT, "/persona Speak like a poet.")
    await bot.stop()
    await start_bot(models=MODELS, **storage)
    await say(tg, CHAT, "hello")
    request = llm.chat_requests[-1]
    assert request["model"] == "smart/large"
    assert system_prompt(request).startswith("Speak like a poet.")


async def test_a_model_taken_off_the_list_falls_back_to_the_default(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    bot = await start_bot(models=MODELS)
    await say(tg, CHAT, "/model smart/large")
    await bot.stop()
    await start_bot(models="test/model,fast/small")  # the operator dropped smart/large
    assert await say(tg, CHAT, "/model") == EN.MODEL_IS.format(model="test/model")
    await say(tg, CHAT, "hello")
    assert llm.chat_requests[-1]["model"] == "test/model"


async def test_pressing_the_same_button_twice_is_not_an_error(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, caplog: pytest.LogCaptureFixture
) -> None:
    await start_bot(models=MODELS)
    await say(tg, CHAT, "/model")
    keyboard_message = tg.messages_to(CHAT)[-1].message_id
    data = buttons(tg, CHAT)[1][1]
    for presses in (1, 2):
        tg.push_callback(CHAT, keyboard_message, data)
        await tg.wait_until(lambda n=presses: len(tg.callback_answers) >= n, what="an answer")
    # The second edit changes nothing, which Telegram refuses; the user sees no apology.
    assert await say(tg, CHAT, "/help") == HELP_TEXT
    assert [m.text for m in tg.messages_to(CHAT)] == [
        EN.MODEL_IS.format(model="test/model"),
        HELP_TEXT,
    ]
    assert [e[1].split(":")[0] for e in tg.errors] == ["Bad Request"]  # the refused edit
    # ...and the operator sees no failed update in the log.
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


async def test_a_button_from_an_older_models_list_says_so(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    bot = await start_bot(models=MODELS)
    await say(tg, CHAT, "/model")
    keyboard_message = tg.messages_to(CHAT)[-1].message_id
    smart = buttons(tg, CHAT)[2][1]
    await bot.stop()
    await start_bot(models="test/model,fast/small")  # the operator dropped smart/large
    tg.push_callback(CHAT, keyboard_message, smart)
    await tg.wait_until(lambda: bool(tg.callback_answers), what="the button's answer")
    assert tg.callback_answers[-1]["text"] == EN.MODEL_GONE.format(choices="test/model, fast/small")
    await say(tg, CHAT, "hello")
    assert llm.chat_requests[-1]["model"] == "test/model"  # nothing changed
