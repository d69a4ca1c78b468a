"""Tasks with QUEUE=redis, as production runs it: `membot receive` and three `membot worker`
processes on one Redis (a private redis-server), the fakes for Telegram and the model. Tasks
set in several chats come due at the moment messages arrive in the same chats: each task is
carried out once, by one process, each message answered once, and each chat's turns are
stored one after another, never side by side. Redis stopped at the due time delays the tasks;
once it answers again each runs once, late.

Tasks are put in the store as the tools put them (RedisTaskStore on the same Redis), a few
seconds ahead; the test waits only for times it chose and for what the fakes record."""

from __future__ import annotations

import json
import signal
from datetime import timedelta

from redis.asyncio import Redis

from membot.clock import utc_now
from membot.redis.client import create_client
from membot.schedule.models import Task, new_task_id
from membot.schedule.redis import RedisTaskStore
from tests.e2e.processes import PrivateRedis, until
from tests.e2e.test_scaleout import CHATS, Cluster, client_of, cluster, redis_server, start
from tests.fakes import FakeLLM, FakeTelegram

__all__ = ["cluster", "redis_server"]  # fixtures, used by name

TASK_MARK = "[Scheduled task"


def prefix_of(cluster: Cluster) -> str:
    return cluster.env["REDIS_PREFIX"]


async def seed(server: PrivateRedis, prefix: str, tasks: list[Task]) -> None:
    client = create_client(server.url)
    store = RedisTaskStore(client, prefix)
    try:
        for task in tasks:
            assert await store.add(task, 50)
    finally:
        await client.aclose()


def tasks_for(chat: int, seconds: float, *names: str, repeat: str | None = None) -> list[Task]:
    due = (utc_now() + timedelta(seconds=seconds)).replace(microsecond=0)
    anchor = due.replace(tzinfo=None).isoformat() if repeat else None
    return [
        Task(
            id=new_task_id(),
            chat=chat,
            text=f"{name} for {chat}",
            due=due,
            zone="UTC",
            author=chat,
            repeat=repeat,
            anchor=anchor,
        )
        for name in names
    ]


def answers(tg: FakeTelegram, chat: int) -> list[str]:
    return [m.text for m in tg.messages_to(chat)]


async def stored(redis: Redis, prefix: str, chat: int) -> list[str]:
    lines = await redis.zrange(f"{prefix}conv:tg:{chat}:messages", 0, -1)
    return [json.loads(line)["role"] for line in lines]


async def test_tasks_fire_once_in_order_with_messages_across_three_workers(
    cluster: Cluster, tg: FakeTelegram, llm: FakeLLM, redis_server: PrivateRedis
) -> None:
    await start(cluster, tg)
    prefix = prefix_of(cluster)
    tasks = [
        t
        for chat in CHATS
        for t in tasks_for(chat, 4, "water", repeat="FREQ=DAILY") + tasks_for(chat, 4, "call")
    ]
    await seed(redis_server, prefix, tasks)
    due = tasks[0].due
    await until(lambda: utc_now() >= due, what="the tasks' time", timeout=30)
    for chat in CHATS:  # messages arriving at the same moment
        tg.push_text(chat, f"hello from {chat}")
    try:
        for chat in CHATS:
            await tg.wait_for_messages(chat, 3, timeout=60)
        for chat in CHATS:  # a later message: any repeat would be answered before it
            tg.push_text(chat, "last")
        for chat in CHATS:
            await tg.wait_for_messages(chat, 4, timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{await cluster.explain(llm)}") from None
    async with client_of(redis_server) as redis:
        store = RedisTaskStore(redis, prefix)
        for chat in CHATS:
            said = answers(tg, chat)
            assert len(said) == 4 and said[-1] == "ANSWER: last", said
            assert sum(f"water for {chat}" in s for s in said) == 1, said
            assert sum(f"call for {chat}" in s for s in said) == 1, said
            assert sum(s == f"ANSWER: hello from {chat}" for s in said) == 1, said
            assert await stored(redis, prefix, chat) == ["user", "assistant"] * 4
            [water] = await store.tasks(chat)  # the one-off is gone, the daily moved on
            assert water.text == f"water for {chat}" and water.due == due + timedelta(days=1)
    for name in cluster.output:
        assert "Traceback" not in cluster.log(name), cluster.describe()


async def test_redis_down_at_the_due_time_delays_tasks_and_never_doubles_them(
    cluster: Cluster, tg: FakeTelegram, llm: FakeLLM, redis_server: PrivateRedis
) -> None:
    await start(cluster, tg)
    prefix = prefix_of(cluster)
    tasks = [t for chat in CHATS for t in tasks_for(chat, 5, "stretch")]
    await seed(redis_server, prefix, tasks)
    due = tasks[0].due
    await until(lambda: utc_now() >= due - timedelta(seconds=2), what="just before", timeout=30)
    redis_server.signal(signal.SIGSTOP)  # takes connections, answers nothing
    try:
        await until(lambda: utc_now() >= due + timedelta(seconds=6), what="after", timeout=30)
        assert all(answers(tg, chat) == [] for chat in CHATS)
    finally:
        redis_server.signal(signal.SIGCONT)
    try:
        for chat in CHATS:
            await tg.wait_for_messages(chat, 1, timeout=60)
        for chat in CHATS:
            tg.push_text(chat, "last")
        for chat in CHATS:
            await tg.wait_for_messages(chat, 2, timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{await cluster.explain(llm)}") from None
    for chat in CHATS:
        said = answers(tg, chat)
        assert len(said) == 2 and f"stretch for {chat}" in said[0], said
    late = [r for r in llm.chat_requests if TASK_MARK in str(r["messages"][-1]["content"])]
    assert len(late) == len(CHATS)
    assert all("late by" in str(r["messages"][-1]["content"]) for r in late)
