"""The bot's own words point the right way, end to end over the fakes: /help lists every
command the bot registers, in every language; /usage does not call an unpriced call free;
/model with nothing to choose offers no choice; a photo no model here can see is answered
with something the user can do."""

from __future__ import annotations

from typing import Any

from membot.bot import texts
from tests.conftest import StartBot
from tests.e2e.test_media_telegram import TEXT_ONLY, VISION
from tests.fakes import FakeLLM, FakeTelegram, media_files

CHAT = 9009
EN, RU = texts.EN, texts.RU


async def say(tg: FakeTelegram, text: str, **kw: Any) -> str:
    before = len(tg.messages_to(CHAT))
    tg.push_text(CHAT, text, **kw)
    return (await tg.wait_for_messages(CHAT, before + 1))[before].text


async def test_help_lists_every_registered_command_in_every_language(
    tg: FakeTelegram, start_bot: StartBot
) -> None:
    await start_bot()
    menus = {"en": tg.commands_for(""), "ru": tg.commands_for("ru")}
    assert set(menus) == set(texts.BY_LANGUAGE)
    for code, menu in menus.items():
        await say(tg, f"/language {code}")
        shown = await say(tg, "/help")
        # /start is what Telegram sends when a user first opens the bot: not listed.
        listed = [c["command"] for c in menu if c["command"] != "start"]
        assert listed and [c for c in listed if f"/{c}" not in shown] == [], code


async def test_usage_says_a_cost_the_provider_did_not_report_is_unknown(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    await say(tg, "hello")  # the fake reports no cost: an unpriced call
    shown = await say(tg, "/usage")
    assert "cost 0" not in shown
    assert EN.USAGE_COST_UNKNOWN in shown
    llm.cost_per_call = "0.25"
    await say(tg, "again")
    shown = await say(tg, "/usage")
    assert EN.USAGE_COST_PARTIAL.format(cost="0.25", unpriced=1) in shown
    await say(tg, "/language ru")
    assert RU.USAGE_COST_PARTIAL.format(cost="0.25", unpriced=1) in await say(tg, "/usage")


async def test_model_without_models_offers_no_choice(tg: FakeTelegram, start_bot: StartBot) -> None:
    await start_bot()  # MODELS empty: the default model only
    assert await say(tg, "/model") == EN.MODEL_ONLY.format(model="test/model")
    assert "reply_markup" not in tg.messages_to(CHAT)[-1].params
    assert "MODELS" in EN.MODEL_ONLY and "MODELS" in RU.MODEL_ONLY


async def test_a_photo_no_model_here_can_see_gets_a_next_step(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    llm.models = {VISION: ["text", "image"], TEXT_ONLY: ["text"]}
    await start_bot(openrouter_model=TEXT_ONLY)
    tg.push_photo(CHAT, data=media_files.jpeg(64, 64), caption="what is it?")
    [answer] = await tg.wait_for_messages(CHAT, 1)
    assert answer.text == EN.NO_IMAGES_AT_ALL.format(model=TEXT_ONLY)
    # Something to do: say it in words, or have a model that sees added; not /model, which
    # has nothing better to offer.
    assert "in words" in answer.text and "MODELS" in answer.text
    assert "/model" not in answer.text.replace(TEXT_ONLY, "")
    assert llm.chat_requests == []
