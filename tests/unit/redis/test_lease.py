"""The summary runs once per conversation across processes: a lease in Redis
(membot/redis/lease.py).

Against the real Redis at 127.0.0.1:6379; each test works under a prefix of its own and
deletes every key under it afterwards. Two RedisRepository instances with two pools stand
for two processes sharing one server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from membot.config import load_settings
from membot.core.summarizer import Summarizer
from membot.ids import ConversationId
from membot.memory import MemoryRepository, Message
from membot.memory.redis import RedisRepository
from membot.redis.client import create_client
from membot.redis.health import RedisHealth
from membot.redis.lease import RedisSummaryLease, lease_timeout, summary_lease
from membot.wiring import build_core
from tests.scripted import Reply, ScriptedModel

REDIS_URL = "redis://127.0.0.1:6379/0"
CID = ConversationId.telegram(77)
EVERY = 4

MakeRepo = Callable[[], RedisRepository]


def lease_for(repo: RedisRepository, timeout: float = 60.0) -> RedisSummaryLease:
    return RedisSummaryLease(repo.client, repo.prefix, timeout=timeout)


async def fill(repo: RedisRepository, count: int = EVERY) -> None:
    for i in range(count // 2):
        await repo.append(
            CID,
            [
                Message(role="user", content=f"question {i}"),
                Message(role="assistant", content=f"answer {i}"),
            ],
        )


async def test_one_summary_across_two_processes_and_the_lease_is_released(
    make_repo: MakeRepo, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = make_repo(), make_repo()
    await fill(first)
    gate = asyncio.Event()
    model_a = ScriptedModel([Reply("the summary", gate=gate)])
    model_b = ScriptedModel()  # any request to it fails the test (unexpected)
    a = Summarizer(model_a, first, every=EVERY, lease=lease_for(first))
    b = Summarizer(model_b, second, every=EVERY, lease=lease_for(second))

    running = asyncio.create_task(a.maybe_summarize(CID))
    await model_a.wait_for_requests(1)  # A holds the lease, its model call is held
    key = f"{first.prefix}lease:summary:{CID}"
    assert await first.client.exists(key) == 1
    assert 0 < await first.client.pttl(key) <= 60_000
    with caplog.at_level(logging.DEBUG, logger="membot.core.summarizer"):
        assert await b.maybe_summarize(CID) is False  # at once, without waiting
    assert model_b.requests == []
    assert any("being made elsewhere" in r.getMessage() for r in caplog.records)

    gate.set()
    assert await running is True
    assert len(model_a.requests) == 1
    assert await first.client.exists(key) == 0  # released by its owner
    assert await second.get_summary(CID) == "the summary"
    # B, now free to take the lease, reads what A saved: nothing is due, no model call.
    assert await b.maybe_summarize(CID) is False
    assert model_b.requests == []

    # Once more is due, B makes the next one (the lease is free again).
    await fill(second)
    model_b.script("the merged summary")
    assert await b.maybe_summarize(CID) is True
    assert len(model_b.requests) == 1
    assert await first.get_summary(CID) == "the merged summary"
    assert await first.client.exists(key) == 0


async def test_concurrent_summarizers_make_one_model_call(make_repo: MakeRepo) -> None:
    repos = [make_repo() for _ in range(4)]
    await fill(repos[0])
    gate = asyncio.Event()
    models = [ScriptedModel([Reply("only one", gate=gate)]) for _ in repos]
    summarizers = [
        Summarizer(m, r, every=EVERY, lease=lease_for(r))
        for m, r in zip(models, repos, strict=True)
    ]
    tasks = [asyncio.create_task(s.maybe_summarize(CID)) for s in summarizers]
    # The losers give up at once, while the winner's model call is still held.
    pending = set(tasks)
    async with asyncio.timeout(5):
        while len(pending) > 1:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    assert sum(len(m.requests) for m in models) == 1
    gate.set()
    results = await asyncio.gather(*tasks)
    assert sorted(results) == [False, False, False, True]
    assert sum(len(m.requests) for m in models) == 1


async def test_a_lease_left_by_a_dead_process_expires(make_repo: MakeRepo) -> None:
    repo = make_repo()
    await fill(repo)
    # A process killed mid-summary left its lease behind (another token, never released).
    key = f"{repo.prefix}lease:summary:{CID}"
    await repo.client.set(key, "someone-else", px=300)
    model = ScriptedModel(["after the expiry"])
    summarizer = Summarizer(model, repo, every=EVERY, lease=lease_for(repo))
    assert await summarizer.maybe_summarize(CID) is False
    assert model.requests == []
    await asyncio.sleep(0.4)
    assert await summarizer.maybe_summarize(CID) is True
    assert await repo.client.exists(key) == 0  # and its own lease released


async def test_release_never_frees_a_lease_taken_over_by_another_owner(
    make_repo: MakeRepo, caplog: pytest.LogCaptureFixture
) -> None:
    repo = make_repo()
    lease = lease_for(repo, timeout=0.2)
    key = lease.key(CID)
    with caplog.at_level(logging.WARNING, logger="membot.core.lease"):
        async with lease.hold(CID) as held:
            assert held
            await asyncio.sleep(0.3)  # expired...
            await repo.client.set(key, "the-new-owner", px=5000)  # ...and taken by another
    assert await repo.client.get(key) == "the-new-owner"
    assert any("expired" in r.getMessage() for r in caplog.records)


async def test_redis_unreachable_skips_the_summary(caplog: pytest.LogCaptureFixture) -> None:
    dead = create_client("redis://127.0.0.1:1/0")  # nothing listens on port 1
    repo = MemoryRepository()
    await repo.append(CID, [Message(role="user", content=f"m{i}") for i in range(EVERY)])
    model = ScriptedModel()
    summarizer = Summarizer(
        model, repo, every=EVERY, lease=RedisSummaryLease(dead, "membot-test:", timeout=5)
    )
    try:
        assert await summarizer.maybe_summarize(CID) is False
    finally:
        await dead.aclose()
    assert model.requests == []


async def test_the_wiring_gives_a_redis_lease_only_with_redis_storage(tmp_path: Path) -> None:
    base = {
        "telegram_bot_token": "1:x",
        "openrouter_api_key": "k",
        "data_dir": tmp_path,
        "llm_timeout": 20.0,
    }
    files = build_core(load_settings(_env_file=None, **base))
    redis = build_core(
        load_settings(_env_file=None, **base, storage="redis", redis_prefix="membot-test:x:")
    )
    try:
        assert files.agent.summarizer.lease is None  # one process per DATA_DIR
        lease = redis.agent.summarizer.lease
        assert isinstance(lease, RedisSummaryLease)
        assert lease.client is redis.redis  # the process's one client
        assert lease.key(CID) == "membot-test:x:lease:summary:tg:77"
        assert lease.timeout == lease_timeout(20.0) == 20.0 * 3 + 30
        assert summary_lease(None, "membot-test:x:", llm_timeout=20.0) is None
    finally:
        await files.aclose()
        await redis.aclose()


async def test_no_lease_is_asked_for_while_redis_is_known_to_be_down(make_repo: MakeRepo) -> None:
    repo = make_repo()
    health = RedisHealth(repo.client.ping, cooldown=3600.0)
    lease = RedisSummaryLease(repo.client, repo.prefix, timeout=60.0, health=health)
    async with lease.hold(CID) as held:
        assert held is True
    health.failed(RedisConnectionError("down"))
    async with lease.hold(CID) as held:
        assert held is False
        assert await repo.client.exists(lease.key(CID)) == 0  # not even asked for
    await health.close()
