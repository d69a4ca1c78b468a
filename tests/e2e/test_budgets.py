"""Usage accounting, budgets and the rate limit, end to end over the fakes (the fake LLM
reports each call's cost, as OpenRouter does). Time is the test's: the core is built with a
clock the test moves, so period ends are crossed without sleeping."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from membot.bot import texts
from membot.config import Settings
from membot.memory.redis import RedisRepository
from membot.roles.process import Process
from membot.wiring import build_core
from tests.conftest import TOKEN, RunningBot
from tests.e2e.helpers import HELP_TEXT, roles_and_texts
from tests.e2e.test_redis_e2e import on_redis
from tests.e2e.test_tools import native_call
from tests.fakes import FakeLLM, FakeTelegram, Reply

CHAT = 7007
GROUP = -7100
EN = texts.EN
START = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)  # an hour before a day's and a month's end


class Clock:
    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


StartClocked = Callable[..., Awaitable[RunningBot]]


@pytest.fixture
async def start_clocked(
    tg: FakeTelegram, llm: FakeLLM, make_settings: Callable[..., Settings]
) -> AsyncIterator[StartClocked]:
    """The real bot, its core on the test's clock; every call costs 0.25."""
    llm.cost_per_call = "0.25"
    running: list[RunningBot] = []

    async def start(clock: Clock, telegram: FakeTelegram = tg, **overrides: Any) -> RunningBot:
        settings = make_settings(telegram_api_base=telegram.base_url, **overrides)
        polls = telegram.call_count("getUpdates")
        app = Process(settings, core=build_core(settings, clock=clock))
        bot = RunningBot(app, asyncio.create_task(app.run(handle_signals=False)))
        running.append(bot)
        await telegram.wait_for_call("getUpdates", count=polls + 1)
        return bot

    yield start
    for bot in reversed(running):
        await bot.stop()


async def say(tg: FakeTelegram, chat: int, text: str, **kw: Any) -> str:
    before = len(tg.messages_to(chat))
    tg.push_text(chat, text, **kw)
    return (await tg.wait_for_messages(chat, before + 1))[before].text


def usage_text(day: str, month: str) -> str:
    return EN.USAGE_YOURS.format(day=day, month=month)


async def test_usage_shows_tokens_and_cost_today_and_this_month(
    tg: FakeTelegram, llm: FakeLLM, start_clocked: StartClocked
) -> None:
    clock = Clock()
    await start_clocked(clock)
    await say(tg, CHAT, "hello")
    await say(tg, CHAT, "again")
    shown = await say(tg, CHAT, "/usage")
    day, month = shown.split("\n")[1:3]
    assert day.startswith("Today: ") and day.endswith("cost 0.5")
    assert month.startswith("This month: ") and month.endswith("cost 0.5")
    # The second prompt repeats the first one's start: the fake's cache served part of it.
    cached = int(day.split("% of them cached")[0].rsplit(" ", 1)[1])
    assert 0 < cached < 100 and f"{cached}% of them cached" in month
    clock.now += timedelta(hours=2)  # the next day and month: nothing spent yet
    shown = await say(tg, CHAT, "/usage")
    assert shown == usage_text(EN.USAGE_NONE, EN.USAGE_NONE)


async def test_in_a_group_usage_adds_the_chats_totals(
    tg: FakeTelegram, llm: FakeLLM, start_clocked: StartClocked
) -> None:
    await start_clocked(Clock())
    tg.push_mention(GROUP, "one", user_id=1, first_name="Ann")
    tg.push_mention(GROUP, "two", user_id=2, first_name="Ben")
    await tg.wait_for_messages(GROUP, 2)
    shown = await say(tg, GROUP, "/usage", user_id=1, first_name="Ann")
    yours, chat = shown.split("\n\n")
    assert yours.splitlines()[1].endswith("cost 0.25")
    assert chat.splitlines()[0] == "This chat"
    assert chat.splitlines()[1].endswith("cost 0.5")


async def test_the_daily_budget_refuses_at_its_edge_until_midnight(
    tg: FakeTelegram, llm: FakeLLM, start_clocked: StartClocked, data_dir: Path
) -> None:
    clock = Clock()
    await start_clocked(clock, user_daily_budget="0.5")
    assert await say(tg, CHAT, "one") == "ANSWER: one"  # spent 0.25
    assert await say(tg, CHAT, "two") == "ANSWER: two"  # spent 0.5 == the budget
    calls = len(llm.chat_requests)
    stored = roles_and_texts(data_dir, CHAT)
    refused = await say(tg, CHAT, "three")
    assert refused == EN.OVER_DAILY.format(wait="in 1 h 0 min")
    assert len(llm.chat_requests) == calls  # nothing went to the model
    assert roles_and_texts(data_dir, CHAT) == stored  # nothing was stored
    clock.now = datetime(2026, 12, 1, tzinfo=UTC)  # the UTC day ends
    assert await say(tg, CHAT, "four") == "ANSWER: four"


async def test_the_monthly_budget_refuses_until_the_first(
    tg: FakeTelegram, llm: FakeLLM, start_clocked: StartClocked
) -> None:
    clock = Clock(datetime(2026, 11, 29, 12, tzinfo=UTC))
    await start_clocked(clock, user_monthly_budget="0.5", user_daily_budget="10")
    await say(tg, CHAT, "one")
    clock.now += timedelta(days=1)  # another day, the same month
    await say(tg, CHAT, "two")
    refused = await say(tg, CHAT, "three")
    assert refused == EN.OVER_MONTHLY.format(date="2026-12-01", wait="in 12 h 0 min")
    clock.now = datetime(2026, 12, 1, 0, 0, 1, tzinfo=UTC)
    assert await say(tg, CHAT, "four") == "ANSWER: four"


async def test_the_rate_limit_is_a_sliding_minute_and_refusals_do_not_count(
    tg: FakeTelegram, llm: FakeLLM, start_clocked: StartClocked
) -> None:
    clock = Clock()
    await start_clocked(clock, user_rate_limit="2")
    assert await say(tg, CHAT, "one") == "ANSWER: one"
    clock.now += timedelta(seconds=30)
    assert await say(tg, CHAT, "/help") == HELP_TEXT  # commands do not count
    assert await say(tg, CHAT, "two") == "ANSWER: two"
    clock.now += timedelta(seconds=20)
    for _ in range(3):  # refused, and not counted
        assert await say(tg, CHAT, "three") == EN.OVER_RATE.format(limit=2, wait="in 10 s")
    clock.now += timedelta(seconds=10)  # "one" leaves the window
    assert await say(tg, CHAT, "four") == "ANSWER: four"


async def test_admins_are_exempt(
    tg: FakeTelegram, llm: FakeLLM, start_clocked: StartClocked
) -> None:
    await start_clocked(
        Clock(), user_daily_budget="0", user_rate_limit="1", admin_user_ids=str(CHAT)
    )
    for text in ("one", "two", "three"):
        assert await say(tg, CHAT, text) == f"ANSWER: {text}"


async def test_two_processes_share_one_budget_on_redis(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_clocked: StartClocked,
    redis_repo: RedisRepository,
    tmp_path: Path,
) -> None:
    clock = Clock()
    limits = {"user_daily_budget": "0.5", **on_redis(redis_repo)}
    await start_clocked(clock, **limits)
    async with FakeTelegram(token=TOKEN) as other:  # a second bot process on the same Redis
        await start_clocked(clock, telegram=other, data_dir=tmp_path / "second", **limits)
        assert await say(tg, CHAT, "one") == "ANSWER: one"
        assert await say(other, CHAT, "two") == "ANSWER: two"
        # 0.5 spent across both: each process now refuses.
        assert await say(tg, CHAT, "three") == EN.OVER_DAILY.format(wait="in 1 h 0 min")
        assert await say(other, CHAT, "four") == EN.OVER_DAILY.format(wait="in 1 h 0 min")


async def test_tool_steps_and_summaries_are_charged_to_the_user_and_chat(
    tg: FakeTelegram, llm: FakeLLM, start_clocked: StartClocked, data_dir: Path
) -> None:
    # One message kept in the window: the turn's user message is summarized at once.
    bot = await start_clocked(Clock(), summary_every=2, window_size=1)
    llm.script(
        Reply(content=None, tool_calls=[native_call("calculate", {"expression": "6*7"})]),
        "It is 42.",
    )
    assert await say(tg, CHAT, "what is 6*7?") == "It is 42."
    await llm.wait_until(lambda: bool(llm.summary_requests), what="the summary")
    await bot.stop()  # shutdown waits for the summary: its charge is recorded by then
    charges = [json.loads(x) for x in (data_dir / "usage.jsonl").read_text().splitlines()]
    assert [c["purpose"] for c in charges] == ["chat", "chat", "summary"]
    assert {(c["user_id"], c["conversation"], c["cost"]) for c in charges} == {
        (CHAT, f"tg:{CHAT}", "0.25")
    }
