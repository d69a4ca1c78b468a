"""QUEUE=redis in one test process: the receiver puts updates in the stream, workers answer
them in each chat's order, exactly once; the webhook keeps its contract.

Against the real Redis at 127.0.0.1:6379, under a prefix of each test's own. (Separate
processes, kill -9 and a Redis restart: tests/e2e/test_scaleout.py.)
"""

from __future__ import annotations

import asyncio
from typing import Any

from membot.memory.redis import RedisRepository
from tests.conftest import StartBot
from tests.e2e.test_redis_e2e import on_redis
from tests.fakes import FakeLLM, FakeTelegram

# Seconds a chat's answers may take: a few turns each, on a machine the suite loads.
ANSWERED_WITHIN = 60


def queued(repo: RedisRepository, **overrides: Any) -> dict[str, Any]:
    return on_redis(repo, queue="redis", claim_idle=1.0, queue_shards=4, **overrides)


async def stream_lengths(repo: RedisRepository, shards: int = 4) -> int:
    return sum([await repo.client.xlen(f"{repo.prefix}q:s:{n}") for n in range(shards)])


async def test_run_answers_every_message_once_in_order(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, redis_repo: RedisRepository
) -> None:
    bot = await start_bot(**queued(redis_repo))
    chats = [101, 102, 103]
    for i in range(5):
        for chat in chats:
            tg.push_text(chat, f"m{i} from {chat}")
    for chat in chats:
        sent = await tg.wait_for_messages(chat, 5, ANSWERED_WITHIN)
        assert [m.text for m in sent] == [f"ANSWER: m{i} from {chat}" for i in range(5)]
    await bot.stop()  # a graceful stop: every update in hand is finished and acknowledged
    assert await stream_lengths(redis_repo) == 0  # acknowledged and deleted


async def test_a_worker_and_a_receiver_as_two_apps(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, redis_repo: RedisRepository
) -> None:
    from membot.roles.process import Process
    from tests.conftest import RunningBot

    receiver = await start_bot(**queued(redis_repo))
    # The receiver above also works; a second, worker-only process shares the shards.
    settings = receiver.app.settings
    worker = Process(settings, "worker")
    task = asyncio.create_task(worker.run(handle_signals=False))
    try:
        for i in range(6):
            for chat in (201, 202, 203, 204):
                tg.push_text(chat, f"n{i}")
        for chat in (201, 202, 203, 204):
            sent = await tg.wait_for_messages(chat, 6, ANSWERED_WITHIN)
            assert [m.text for m in sent] == [f"ANSWER: n{i}" for i in range(6)]
    finally:
        await RunningBot(worker, task).stop()


async def test_one_receiver_polls_at_a_time_and_a_stand_in_takes_over(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, redis_repo: RedisRepository
) -> None:
    first = await start_bot(**queued(redis_repo))
    second = await start_bot(**queued(redis_repo))  # `membot run` twice: one polls
    tg.push_text(301, "before")
    await tg.wait_for_messages(301, 1, ANSWERED_WITHIN)
    await first.stop()  # the poller goes (its lease is released): the stand-in polls
    tg.push_text(301, "after")
    sent = await tg.wait_for_messages(301, 2, ANSWERED_WITHIN)
    assert [m.text for m in sent] == ["ANSWER: before", "ANSWER: after"]
    # Never two polls at once: Telegram would have answered one of them 409 Conflict.
    assert not [e for e in tg.errors if e[0] == "getUpdates"]
    assert second.app.source is not None
    assert second.app.source.received >= 1
