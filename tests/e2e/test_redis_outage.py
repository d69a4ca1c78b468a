"""End to end: Redis goes down (killed, stopped, hung, never there) under the real bot and the
real API; every message is still answered, one WARNING tells the outage, the turns answered
meanwhile are spooled under DATA_DIR and written back in order once Redis is back, and
memory is used again within 5 seconds, with no restart.

Each test runs its own `redis-server` on a free port (AOF with fsync always in the test's
directory, so a restart keeps what was written) and its own REDIS_PREFIX.
"""

from __future__ import annotations

import json
import logging
import signal
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from membot.bot.texts import EN
from membot.ids import ConversationId
from membot.memory.outage import ResilientRepository
from membot.memory.redis import RedisRepository
from membot.redis.client import create_client
from membot.redis.health import CALL_BUDGET, AlwaysUp, RedisHealth
from tests import api_support
from tests.api_support import RunningApi, StartApi
from tests.conftest import StartBot
from tests.e2e.helpers import prompt_texts
from tests.e2e.processes import PrivateRedis, until
from tests.fakes import FakeLLM, FakeTelegram

start_api = api_support.start_api

CHAT = 3003
OUTAGE = "Redis is unavailable"
BACK = "Redis is back"


@pytest.fixture
async def redis_server(tmp_path: Path) -> AsyncIterator[PrivateRedis]:
    server = PrivateRedis(tmp_path / "redis")
    yield server
    if server.proc is not None:
        server.proc.kill()
        server.proc.wait(10)


@pytest.fixture
def caplog_info(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO)
    return caplog


def redis_settings(server: PrivateRedis) -> dict[str, Any]:
    return {
        "storage": "redis",
        "redis_url": server.url,
        "redis_prefix": f"membot-outage:{uuid.uuid4().hex}:",
    }


def logged(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(text in r.getMessage() for r in caplog.records)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("membot")
    ]


async def say(tg: FakeTelegram, text: str) -> tuple[str, float]:
    """Send one message; the bot's answer and how long it took."""
    before = len(tg.messages_to(CHAT))
    started = time.monotonic()
    tg.push_text(CHAT, text)
    sent = await tg.wait_for_messages(CHAT, before + 1)
    return sent[before].text, time.monotonic() - started


def last_prompt(llm: FakeLLM) -> list[tuple[str, str]]:
    return prompt_texts(llm.chat_requests[-1])


def turns(*texts: str) -> list[tuple[str, str]]:
    return [pair for t in texts for pair in (("user", t), ("assistant", f"ANSWER: {t}"))]


async def back(caplog: pytest.LogCaptureFixture, outages: int = 1) -> float:
    """Wait for the bot to see Redis again (its INFO); how long that took."""
    return await until(lambda: logged(caplog, BACK) >= outages, what="Redis back", timeout=5.0)


async def test_killed_redis_answers_go_on_and_the_spool_is_written_back_in_order(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    redis_server: PrivateRedis,
    caplog_info: pytest.LogCaptureFixture,
    data_dir: Path,
) -> None:
    await redis_server.start()
    await start_bot(**redis_settings(redis_server))
    up = [(await say(tg, text))[1] for text in ("one", "two")]
    assert last_prompt(llm) == [*turns("one"), ("user", "two")]

    caplog_info.clear()
    await redis_server.stop(signal.SIGKILL)
    answers = [await say(tg, text) for text in ("three", "four", "five")]
    assert [a for a, _ in answers] == ["ANSWER: three", "ANSWER: four", "ANSWER: five"]
    # Without Redis's memory; the turns answered since are read back from the spool.
    assert last_prompt(llm) == [*turns("three", "four"), ("user", "five")]
    # One per outage, not one per message. (The due tasks' ticker says its tasks wait when its
    # tick comes while Redis is down: tasks, not answering.)
    [warning] = [w for w in warnings(caplog_info) if not w.startswith("tasks:")]
    assert OUTAGE in warning
    assert max(t for _, t in answers) < max(up) + 0.5
    spool = data_dir / "redis-spool.jsonl"
    # The three turns (each followed by its answer's delivery, once recorded).
    ops = [json.loads(line)["op"] for line in spool.read_text().splitlines()]
    assert ops.count("append") == 3 and set(ops) <= {"append", "delivered"}

    await redis_server.start()
    assert await back(caplog_info) < 5.0
    answer, _ = await say(tg, "six")
    assert answer == "ANSWER: six"
    assert last_prompt(llm) == [*turns("one", "two", "three", "four", "five"), ("user", "six")]
    assert spool.read_text() == ""
    assert warnings(caplog_info) == [warning]


async def test_a_hung_redis_costs_one_call_budget_then_nothing(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    redis_server: PrivateRedis,
    caplog_info: pytest.LogCaptureFixture,
) -> None:
    # What bounds the delay a hung Redis adds (the 0.5 s budget of the one call that finds
    # it hung, then nothing) is observed through the health object, not timed: the machines
    # are too noisy for wall-clock limits.
    await redis_server.start()
    bot = await start_bot(**redis_settings(redis_server))
    core = bot.app.core
    assert isinstance(core.repository, ResilientRepository) and isinstance(core.health, RedisHealth)
    assert core.repository.health is core.health  # one breaker for every user of Redis
    await say(tg, "one")
    redis_server.signal(signal.SIGSTOP)  # accepts connections, answers nothing
    for text in ("two", "three", "four"):
        assert (await say(tg, text))[0] == f"ANSWER: {text}"
    assert logged(caplog_info, OUTAGE) == 1
    # Once open, no answer probed or called the server: a call refuses at once while the
    # breaker is open, and only the background reviver probes (membot/redis/health.py).
    assert not core.health.available and core.health.outages == 1
    assert core.health.budget == CALL_BUDGET == 0.5

    redis_server.signal(signal.SIGCONT)
    assert await back(caplog_info) < 5.0
    await say(tg, "five")
    assert last_prompt(llm) == [*turns("one", "two", "three", "four"), ("user", "five")]


async def test_a_bot_started_while_redis_is_down_answers_and_uses_it_once_up(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    redis_server: PrivateRedis,
    caplog_info: pytest.LogCaptureFixture,
    data_dir: Path,
) -> None:
    settings = redis_settings(redis_server)
    bot = await start_bot(**settings)  # nothing listens on the port yet
    assert logged(caplog_info, "Redis is unreachable at start-up") == 1
    assert (await say(tg, "one"))[0] == "ANSWER: one"
    await bot.stop()  # the spool outlives the bot

    await start_bot(**settings)
    assert (await say(tg, "two"))[0] == "ANSWER: two"
    assert last_prompt(llm) == [*turns("one"), ("user", "two")]  # from the spool
    spooled = (data_dir / "redis-spool.jsonl").read_text().splitlines()
    assert [json.loads(line)["op"] for line in spooled].count("append") == 2  # and deliveries
    # One warning per start while it is down; answering adds none. (The due tasks' ticker
    # says its tasks wait when its tick comes before the answer: tasks, not answering.)
    assert [w for w in warnings(caplog_info) if "Redis" in w and not w.startswith("tasks:")] == [
        w for w in warnings(caplog_info) if w.startswith("Redis is unreachable at start-up")
    ]
    assert logged(caplog_info, "Redis is unreachable at start-up") == 2

    await redis_server.start()
    await back(caplog_info)
    await say(tg, "three")
    assert last_prompt(llm) == [*turns("one", "two"), ("user", "three")]


async def test_the_api_answers_new_requests_as_one_round_and_refuses_sessions(
    start_api: StartApi,
    redis_server: PrivateRedis,
    caplog_info: pytest.LogCaptureFixture,
) -> None:
    await redis_server.start()
    api: RunningApi = await start_api(**redis_settings(redis_server))
    first = await api.client.chat({"message": "plan a trip", "maxRounds": 3})
    assert (first.status, first.body["round"], first.body["maxRounds"]) == (200, 1, 3)
    sid = first.body["sessionId"]

    await redis_server.stop(signal.SIGKILL)
    refused = await api.client.chat({"message": "next", "sessionId": sid})
    assert (refused.status, refused.code) == (503, "SERVICE_UNAVAILABLE")
    new = await api.client.chat({"message": "plan a dinner", "maxRounds": 3})
    assert new.status == 200
    assert (new.body["round"], new.body["maxRounds"], new.body["isComplete"]) == (1, 1, True)
    plain = await api.client.chat({"message": "hello"})
    assert (plain.status, plain.body["content"]) == (200, "ANSWER: hello")
    assert logged(caplog_info, OUTAGE) == 1

    await redis_server.start()
    await back(caplog_info)
    again = await api.client.chat({"message": "next", "sessionId": sid})
    assert (again.status, again.body["round"]) == (200, 2)
    # The session answered during the outage was written back: one round, complete.
    done = await api.client.chat({"message": "more", "sessionId": new.body["sessionId"]})
    assert (done.status, done.code) == (400, "DIALOG_COMPLETED")


async def test_with_queue_redis_the_api_answers_503_while_redis_is_down(
    start_api: StartApi,
    redis_server: PrivateRedis,
    caplog_info: pytest.LogCaptureFixture,
) -> None:
    # QUEUE=redis: no breaker and no spool (membot.wiring `build_redis` says why), so nothing
    # is answered without Redis; but an unreachable storage is 503, never 500.
    await redis_server.start()
    api: RunningApi = await start_api(**redis_settings(redis_server), queue="redis")
    assert isinstance(api.core.health, AlwaysUp) and api.core.redis is not None
    first = await api.client.chat({"message": "plan a trip", "maxRounds": 3})
    assert (first.status, first.body["content"]) == (200, "ANSWER: plan a trip")
    sid = first.body["sessionId"]

    await redis_server.stop()
    for body in ({"message": "hello"}, {"message": "plan a dinner", "maxRounds": 3}):
        refused = await api.client.chat(body)
        assert refused.status == 503
        assert refused.headers["Content-Type"].startswith("application/json")
        assert refused.body == {
            "error": "The storage is unavailable right now; try again soon.",
            "code": "SERVICE_UNAVAILABLE",
        }
    session = await api.client.chat({"message": "next", "sessionId": sid})
    assert session.status == 503
    assert session.body == {
        "error": "The session's memory is unavailable right now; try again soon or start a "
        "new session.",
        "code": "SERVICE_UNAVAILABLE",
    }
    assert logged(caplog_info, "unexpected") == 0  # nothing went the internal-error way

    await redis_server.start()  # the same port and append-only file
    again = await api.client.chat({"message": "next", "sessionId": sid})
    assert (again.status, again.body["round"]) == (200, 2)


async def test_a_turn_answered_during_the_outage_leaves_the_conversations_state_alone(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    redis_server: PrivateRedis,
    caplog_info: pytest.LogCaptureFixture,
) -> None:
    await redis_server.start()
    settings = redis_settings(redis_server)
    await start_bot(**settings)
    await say(tg, "/consult 3 plan a trip to the mountains")  # round 1 of 3
    await say(tg, "/language en")  # by hand
    repo = RedisRepository(create_client(redis_server.url), prefix=settings["redis_prefix"])
    cid = ConversationId.telegram(CHAT)
    real = (await repo.get_meta(cid)).state
    assert (real.mode, real.round, real.max_rounds, real.language) == ("consultation", 1, 3, "en")

    await redis_server.stop(signal.SIGKILL)
    answer, _ = await say(tg, "Привет, помоги мне выбрать хороший ноутбук для работы")
    assert answer.startswith("ANSWER: Привет")  # answered, without memory
    refused, _ = await say(tg, "/language ru")  # the state read now is a stand-in
    assert refused == EN.INTERNAL_ERROR

    await redis_server.start()
    await back(caplog_info)
    await repo.client.connection_pool.disconnect()
    state = (await repo.get_meta(cid)).state
    assert state == real  # the consultation and the hand-set language survive the replay
    assert (await repo.tail(cid, 1))[0].content.startswith("ANSWER: Привет")
    await repo.close()
