"""Telegram's limits on what the bot sends, against a fake Telegram that enforces them (429
with retry_after beyond the limit, as Telegram does): a burst in one chat goes out at the
configured pace and every answer arrives; a 429 is waited out, never dropped."""

from __future__ import annotations

import time
from typing import Any

import pytest

from membot.memory.redis import RedisRepository
from tests.conftest import StartBot
from tests.e2e.test_stream_intake import queued
from tests.fakes import FakeLLM, FakeTelegram

CHAT = 4004
RATE = 20.0  # per second: 40 answers take about two seconds
BURST = 3


def pace(**overrides: Any) -> dict[str, Any]:
    return {"telegram_chat_rate": RATE, "telegram_chat_burst": BURST, **overrides}


@pytest.mark.parametrize("queue", ["local", "redis"])
async def test_a_burst_of_forty_goes_out_at_the_configured_pace(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    redis_repo: RedisRepository,
    queue: str,
) -> None:
    # The fake refuses anything faster than the bot is configured to send (0.1 s of slack
    # for the two clocks and the trip between them).
    tg.flood_control(chat_rate=RATE, chat_burst=BURST, slack=0.1)
    await start_bot(**(pace(**queued(redis_repo)) if queue == "redis" else pace()))
    questions = [f"q{i}" for i in range(40)]
    for text in questions:
        tg.push_text(CHAT, text)
    sent = await tg.wait_for_messages(CHAT, 40, timeout=120)
    assert [m.text for m in sent] == [f"ANSWER: {q}" for q in questions]
    assert tg.flood_refusals == 0, tg.errors
    # No window holds more than the burst plus what the rate allows in it.
    times = [m.at for m in sent]
    for i in range(len(times)):
        for j in range(i + BURST, len(times)):
            allowed = (j - i - (BURST - 1)) / RATE
            assert times[j] - times[i] >= allowed - 0.1, (i, j, times[j] - times[i])


async def test_a_429_pauses_the_chat_and_the_answer_still_arrives(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, redis_repo: RedisRepository
) -> None:
    await start_bot(**queued(redis_repo))
    tg.fail_next("sendMessage", 429, "Too Many Requests: retry after 1", chat_id=CHAT)
    started = time.monotonic()
    tg.push_text(CHAT, "hello")
    sent = await tg.wait_for_messages(CHAT, 1, timeout=30)
    assert [m.text for m in sent] == ["ANSWER: hello"]
    assert sent[0].at - started >= 1.0  # retry_after was honoured
    assert [e for e in tg.errors if e[0] == "sendMessage"] == [
        ("sendMessage", "Too Many Requests: retry after 1")
    ]
