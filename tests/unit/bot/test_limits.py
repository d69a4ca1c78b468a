"""Telegram's limits (bot/limits.py): the pace each limit allows, with the clock given by
the test; the same limits shared by two processes' clients on the real Redis; a 429's pause
for everyone; and pacing that goes on, per process, while Redis fails."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from membot.bot.limits import US, LocalLimits, Rates, RedisLimits
from membot.config import Settings
from membot.redis.client import create_client
from tests.unit.conftest import REDIS_URL

CHAT = 7
GROUP = -100123


def rates(**overrides: float) -> Rates:
    values: dict[str, float] = {
        "telegram_chat_rate": 1.0,
        "telegram_chat_burst": 3,
        "telegram_group_rate": 20.0,
        "telegram_bot_rate": 30.0,
    }
    values.update(overrides)
    settings = Settings.model_validate({"openrouter_api_key": "sk-test", **values})
    return Rates.of(settings.telegram)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def sent_at_once(limits: LocalLimits, chat: int) -> int:
    """How many sends to the chat go now, before the first that must wait."""
    count = 0
    while limits.try_acquire(chat) == 0:
        count += 1
    return count


def test_a_chat_gets_its_burst_then_one_message_a_second() -> None:
    clock = Clock()
    limits = LocalLimits(rates(), clock)
    assert sent_at_once(limits, CHAT) == 3
    assert limits.try_acquire(CHAT) == pytest.approx(1 * US, abs=1)
    clock.now += 0.5
    assert limits.try_acquire(CHAT) == pytest.approx(0.5 * US, abs=1)
    clock.now += 0.5
    assert limits.try_acquire(CHAT) == 0  # exactly one more after a second
    assert limits.try_acquire(CHAT) > 0
    assert sent_at_once(limits, CHAT + 1) == 3  # another chat is not held up


def test_a_group_gets_twenty_a_minute() -> None:
    clock = Clock()
    limits = LocalLimits(rates(telegram_chat_rate=100, telegram_chat_burst=1), clock)
    sent = 0
    for _ in range(60 * 10):  # a minute, in steps of 0.1 s, sending whenever allowed
        while limits.try_acquire(GROUP) == 0:
            sent += 1
        clock.now += 0.1
    assert sent == 20


def test_the_bot_as_a_whole_gets_thirty_a_second() -> None:
    clock = Clock()
    limits = LocalLimits(rates(), clock)
    sent = sum(sent_at_once(limits, chat) for chat in range(1, 100))
    assert sent == 30
    clock.now += 1.0
    assert sum(sent_at_once(limits, chat) for chat in range(100, 200)) == 30


async def test_a_pause_holds_the_chat_and_only_it() -> None:
    clock = Clock()
    limits = LocalLimits(rates(), clock)

    await limits.pause(CHAT, 5)
    assert limits.try_acquire(CHAT) == pytest.approx(5 * US, abs=1)
    assert limits.try_acquire(CHAT + 1) == 0
    clock.now += 5
    assert limits.try_acquire(CHAT) == 0


@pytest.fixture
async def clients() -> AsyncIterator[tuple[Redis, Redis]]:
    """Two clients with their own pools, as two processes would have."""
    first, second = create_client(REDIS_URL), create_client(REDIS_URL)
    yield first, second
    await first.aclose()
    await second.aclose()


async def test_two_processes_share_one_chats_pace(
    clients: tuple[Redis, Redis], prefix: str
) -> None:
    one, two = (RedisLimits(c, prefix, rates()) for c in clients)
    now = 5_000 * US
    assert [await one.try_acquire(CHAT, now) for _ in range(2)] == [0, 0]
    assert await two.try_acquire(CHAT, now) == 0  # the third of the burst
    assert await two.try_acquire(CHAT, now) == US  # the fourth waits a second, in both
    assert await one.try_acquire(CHAT, now + US // 2) == US // 2
    assert await one.try_acquire(CHAT, now + US) == 0
    assert await two.try_acquire(CHAT, now + US) == US


async def test_a_429_pauses_the_chat_for_every_process(
    clients: tuple[Redis, Redis], prefix: str
) -> None:
    one, two = (RedisLimits(c, prefix, rates()) for c in clients)
    await one.pause(CHAT, 30)
    wait = await two.try_acquire(CHAT)
    assert 29 * US < wait <= 30 * US
    assert await two.try_acquire(CHAT + 1) == 0
    await two.pause(CHAT, 2)  # a shorter pause seen later does not cut it short
    assert await one.try_acquire(CHAT) > 29 * US


async def test_while_redis_fails_each_process_paces_itself(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Nothing listens on port 1: every call fails at once, as with Redis down.
    client = create_client("redis://127.0.0.1:1/0")
    try:
        limits = RedisLimits(client, "membot-test:", rates(telegram_chat_rate=0.1))
        with caplog.at_level(logging.WARNING, logger="membot.bot.limits"):
            for _ in range(3):  # the burst goes at once
                await limits.acquire(CHAT)
        assert limits.local.try_acquire(CHAT) > 5 * US  # the next waits its ten seconds
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert "paces itself" in warnings[0].getMessage()
    finally:
        await client.aclose()


async def test_a_draft_takes_from_the_bots_budget_only_while_half_of_it_is_free() -> None:
    clock = Clock()
    limits = LocalLimits(rates(telegram_bot_rate=10), clock)
    # Of a burst of ten, drafts may take five; never waiting, they are then refused at once.
    drafts = [await limits.spare(chat) for chat in range(1, 8)]
    assert drafts == [True] * 5 + [False] * 2
    # The other half is left to messages, which go at once (chats of their own).
    assert sum(sent_at_once(limits, chat) for chat in range(10, 20)) == 5
    # Drafts do not count against a chat's own pace: its answer goes at once.
    assert limits.try_acquire(1) > 0  # the bot's budget is spent now ...
    clock.now += 1.0
    assert sent_at_once(limits, 1) == 3  # ... and a second later the chat has its burst
    # A chat paused by a 429 gets no drafts either.
    await limits.pause(2, 5)
    assert not await limits.spare(2) and await limits.spare(3)


async def test_a_slow_bot_leaves_no_room_for_drafts() -> None:
    clock = Clock()
    for rate, drafts in ((1.0, 0), (2.0, 1)):
        limits = LocalLimits(rates(telegram_bot_rate=rate), clock)
        assert [await limits.spare(CHAT) for _ in range(3)].count(True) == drafts
        assert limits.try_acquire(CHAT + 1) == 0  # a message still goes at once


async def test_drafts_share_the_budget_through_redis(
    clients: tuple[Redis, Redis], prefix: str
) -> None:
    one, two = (RedisLimits(c, prefix, rates(telegram_bot_rate=4)) for c in clients)
    now = 5_000 * US
    # Of the bot's burst of four, two for drafts, whichever process sends them.
    assert [await one.spare(CHAT, now), await two.spare(CHAT + 1, now)] == [True, True]
    assert not await one.spare(CHAT + 2, now)
    assert await two.try_acquire(CHAT + 3, now) == 0  # messages have the rest
    assert await one.try_acquire(CHAT + 4, now) == 0
    assert await one.try_acquire(CHAT + 5, now) > 0
    await two.pause(CHAT + 6, 3)
    assert not await one.spare(CHAT + 6, now + 2 * US)
    assert await one.spare(CHAT + 7, now + 2 * US)
