"""End to end: a Russian-speaking chat gets the bot's own words in Russian, over the real bot,
real files and the fake model; the language is detected once and /language changes it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from membot.bot import texts
from membot.core.language import SUPPORTED
from tests.conftest import StartBot
from tests.e2e.helpers import meta
from tests.fakes import FakeLLM, FakeTelegram, Reply

CHAT = 4004
RU = texts.RU
EN = texts.EN
FIRST = "Привет! Помоги мне спланировать поездку в Казань на выходные"


async def say(tg: FakeTelegram, text: str, answers: int = 1) -> list[str]:
    """Send one message; the `answers` messages the user then sees, in order."""
    before = len(tg.messages_to(CHAT))
    tg.push_text(CHAT, text)
    sent = await tg.wait_for_messages(CHAT, before + answers)
    return [m.text for m in sent[before:]]


def label(words: texts.Texts, k: int, n: int, *, final: bool = False) -> str:
    # The labels are Markdown (italics); what the user reads is the text without the marks.
    template = words.ROUND_FINAL if final else words.ROUND
    return "\n\n" + template.format(round=k, max_rounds=n).strip("_")


def detections(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "language detected" in r.getMessage()]


async def test_a_russian_chat_hears_the_bot_in_russian(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    data_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await start_bot()
    with caplog.at_level(logging.INFO, logger="membot.core.language"):
        assert await say(tg, FIRST) == [f"ANSWER: {FIRST}"]
        assert meta(data_dir, CHAT)["state"]["language"] == "ru"
        assert await say(tg, "/help") == [RU.HELP.format(rounds=3, max_rounds=10)]
        assert await say(tg, "/consult 2 куда сходить вечером") == [
            "ANSWER: куда сходить вечером" + label(RU, 1, 2)
        ]
        assert await say(tg, "/consult ещё одна") == [
            RU.CONSULT_IN_PROGRESS.format(round=2, max_rounds=2)
        ]
        llm.script(Reply(status=503))
        assert await say(tg, "люблю музеи и хорошую еду") == [RU.LLM_FAILED]
        assert await say(tg, "люблю музеи и хорошую еду") == [
            "ANSWER: люблю музеи и хорошую еду" + label(RU, 2, 2, final=True)
        ]
        llm.script(Reply(status=429, error_message="slow down"))
        assert await say(tg, "спасибо, а что с погодой?") == [RU.LLM_BUSY]
        assert await say(tg, "/finish") == [RU.NOT_CONSULTING]
        before = len(tg.messages_to(CHAT))
        tg.push_sticker(CHAT)
        assert (await tg.wait_for_messages(CHAT, before + 1))[-1].text == RU.TEXT_ONLY
        assert await say(tg, "/reset") == [RU.RESET_DONE]
    # One detection in the whole conversation: the first message; its time, not its text.
    [detected] = detections(caplog)
    assert f"tg:{CHAT}" in detected and ": ru (" in detected and "Казань" not in detected


async def test_finish_speaks_the_language_of_the_dialog(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    assert await say(tg, "/consult 3 помоги выбрать велосипед для города") == [
        "ANSWER: помоги выбрать велосипед для города" + label(RU, 1, 3)
    ]
    # What /finish stores as the user's words is in Russian too.
    assert await say(tg, "/finish") == [
        f"ANSWER: {RU.FINISH_REQUEST}" + label(RU, 2, 3, final=True)
    ]


async def test_language_command_shows_sets_and_refuses(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    data_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await start_bot()
    assert await say(tg, "/language") == [EN.LANGUAGE_UNKNOWN]
    assert await say(tg, "/language ru") == [RU.LANGUAGE_SET.format(name="русский", code="ru")]
    assert meta(data_dir, CHAT)["state"]["language"] == "ru"
    assert await say(tg, "/language") == [RU.LANGUAGE_IS.format(name="русский", code="ru")]
    [refusal] = await say(tg, "/language klingon please")
    assert refusal == RU.LANGUAGE_BAD_CODE.format(
        code="klingon please", supported=", ".join(SUPPORTED)
    )
    assert "\n" not in refusal and "en, es" in refusal
    # Set by hand, it is not detected from an English message.
    with caplog.at_level(logging.INFO, logger="membot.core.language"):
        assert await say(tg, "hello there, how are you doing?") == [
            "ANSWER: hello there, how are you doing?"
        ]
    assert detections(caplog) == []
    assert await say(tg, "/language EN") == [EN.LANGUAGE_SET.format(name="English", code="en")]
    assert await say(tg, "/help") == [EN.HELP.format(rounds=3, max_rounds=10)]
    assert await say(tg, "/reset") == [EN.RESET_DONE]
    # /reset forgets it: unknown again, then told from the next message.
    assert await say(tg, "/language") == [EN.LANGUAGE_UNKNOWN]
    await say(tg, FIRST)
    assert await say(tg, "/language") == [RU.LANGUAGE_IS.format(name="русский", code="ru")]


async def test_the_summary_is_asked_for_in_the_chats_language(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(summary_every=2, window_size=1)
    await say(tg, FIRST)
    await say(tg, FIRST)  # 4 messages, 1 kept in the window: a summary is due
    await llm.wait_until(lambda: len(llm.summary_requests) == 1, what="the summary request")
    instructions = llm.summary_requests[0]["messages"][0]["content"]
    assert "Write the summary in Russian." in instructions


async def test_the_command_menu_is_registered_in_russian_too(
    tg: FakeTelegram, start_bot: StartBot
) -> None:
    await start_bot()
    russian = [c["description"] for c in tg.commands_for("ru")]
    assert russian == [d for _, d in texts.get("ru").COMMANDS]
    assert [c["description"] for c in tg.commands_for("")] == [
        d for _, d in texts.get("en").COMMANDS
    ]
