"""End to end on STORAGE=redis: memory outlives DATA_DIR, processes share conversations, and
the language is detected once per conversation and spoken in the bot's own messages.

Against the real Redis at 127.0.0.1:6379 (CI has one too); each test works under a prefix of
its own and deletes every key under it afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from membot.api.server import ApiServer
from membot.bot import texts
from membot.config import Settings
from membot.ids import ConversationId
from membot.memory.redis import RedisRepository
from membot.wiring import build_core
from tests.api_support import API_TOKEN, ApiClient, free_port
from tests.conftest import API_KEY, TOKEN, StartBot
from tests.e2e.helpers import prompt_texts
from tests.fakes import FakeLLM, FakeTelegram
from tests.fakes.process import membot_env, spawn_membot

REDIS_URL = "redis://127.0.0.1:6379/0"
CHAT = 9001
RU_FIRST = "Привет! Помоги мне спланировать поездку в Казань на выходные"
RU_HELP = texts.get("ru").HELP.format(rounds=3, max_rounds=10)
STARTUP = 120.0  # a cold `python -m membot` imports aiogram, pydantic, openai... on a busy machine


def on_redis(repo: RedisRepository, **overrides: Any) -> dict[str, Any]:
    return {"storage": "redis", "redis_url": REDIS_URL, "redis_prefix": repo.prefix, **overrides}


async def say(tg: FakeTelegram, chat: int, text: str, timeout: float = 30.0) -> str:
    before = len(tg.messages_to(chat))
    tg.push_text(chat, text)
    sent = await tg.wait_for_messages(chat, before + 1, timeout=timeout)
    return sent[before].text


def conversation_files(data_dir: Path) -> list[str]:
    """What of a conversation lies under DATA_DIR (the search cache, the journal: not counted)."""
    names = {"messages.txt", "meta.json", "summary.txt", "summaries.log", "facts.json"}
    return sorted(str(p) for p in data_dir.rglob("*") if p.name in names)


def detections(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "language detected" in r.getMessage()]


# -- (a) memory lives in Redis, not in DATA_DIR ----------------------------------------------


async def test_remembers_across_a_restart_with_an_empty_data_dir(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    redis_repo: RedisRepository,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    bot = await start_bot(**on_redis(redis_repo))
    assert await say(tg, CHAT, "my cat is called Tom") == "ANSWER: my cat is called Tom"
    assert await say(tg, CHAT, "and my dog is Rex") == "ANSWER: and my dog is Rex"
    await bot.stop()
    assert conversation_files(data_dir) == []  # nothing of the chat was written there
    shutil.rmtree(data_dir, ignore_errors=True)

    fresh = tmp_path / "fresh-data"
    await start_bot(**on_redis(redis_repo, data_dir=fresh))
    assert await say(tg, CHAT, "what pets do I have?") == "ANSWER: what pets do I have?"
    assert prompt_texts(llm.chat_requests[-1]) == [
        ("user", "my cat is called Tom"),
        ("assistant", "ANSWER: my cat is called Tom"),
        ("user", "and my dog is Rex"),
        ("assistant", "ANSWER: and my dog is Rex"),
        ("user", "what pets do I have?"),
    ]
    assert not data_dir.exists() and conversation_files(fresh) == []
    stored = [m.content async for m in redis_repo.iter_messages(ConversationId.telegram(CHAT))]
    assert len(stored) == 6 and stored[-1] == "ANSWER: what pets do I have?"


# -- (c) the language, detected once ---------------------------------------------------------


async def test_the_language_is_detected_once_and_kept_across_a_restart(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    redis_repo: RedisRepository,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cid = ConversationId.telegram(CHAT)
    with caplog.at_level(logging.INFO, logger="membot.core.language"):
        bot = await start_bot(**on_redis(redis_repo))
        assert await say(tg, CHAT, RU_FIRST) == f"ANSWER: {RU_FIRST}"
        assert (await redis_repo.get_meta(cid)).state.language == "ru"
        assert (
            await say(tg, CHAT, "А что посмотреть вечером?") == "ANSWER: А что посмотреть вечером?"
        )
        # English now, yet the conversation's language stays: it is not detected again.
        assert await say(tg, CHAT, "and what about the weather there?") == (
            "ANSWER: and what about the weather there?"
        )
        assert await say(tg, CHAT, "/help") == RU_HELP
        await bot.stop()
        # A new bot (a new process, an empty DATA_DIR) reads it from Redis.
        await start_bot(**on_redis(redis_repo, data_dir=tmp_path / "fresh-data"))
        assert await say(tg, CHAT, "спасибо, ещё вопрос про музеи") == (
            "ANSWER: спасибо, ещё вопрос про музеи"
        )
        assert await say(tg, CHAT, "/help") == RU_HELP
        assert await say(tg, CHAT, "/reset") == texts.get("ru").RESET_DONE
    [detected] = detections(caplog)
    assert f"tg:{CHAT}" in detected and ": ru (" in detected
    assert len(llm.chat_requests) == 4


# -- (b) two processes on one Redis ----------------------------------------------------------


async def _wait_for_line(path: Path, needle: str, process: asyncio.subprocess.Process) -> None:
    async with asyncio.timeout(STARTUP):
        while needle not in path.read_text(errors="replace"):
            assert process.returncode is None, f"membot exited:\n{path.read_text()}"
            await asyncio.sleep(0.05)


async def test_a_polling_process_and_an_api_process_share_conversations(
    tg: FakeTelegram,
    llm: FakeLLM,
    redis_repo: RedisRepository,
    make_settings: Callable[..., Settings],
    tmp_path: Path,
) -> None:
    port = free_port()
    common = {
        "openrouter_api_key": API_KEY,
        "openrouter_base_url": llm.base_url,
        "openrouter_model": "test/model",
        "log_level": "INFO",
        "storage": "redis",
        "redis_url": REDIS_URL,
        "redis_prefix": redis_repo.prefix,
    }
    bot_env = membot_env(
        **common,
        telegram_bot_token=TOKEN,
        telegram_api_base=tg.base_url,
        data_dir=str(tmp_path / "bot-data"),
    )
    api_env = membot_env(
        **common, data_dir=str(tmp_path / "api-data"), api_port=str(port), api_tokens=API_TOKEN
    )
    bot_log, api_log = tmp_path / "bot.stderr", tmp_path / "api.stderr"
    processes: list[asyncio.subprocess.Process] = []
    with open(bot_log, "wb") as bot_err, open(api_log, "wb") as api_err:
        try:
            for env, command, err in ((bot_env, "run", bot_err), (api_env, "api", api_err)):
                processes.append(await spawn_membot(tmp_path, env, command, stdout=err, stderr=err))
            api = processes[1]
            # A third member of the cluster in this process: the API over its own core.
            local_settings = make_settings(
                **on_redis(redis_repo, data_dir=tmp_path / "local-data"),
                api_port=free_port(),
                api_tokens=API_TOKEN,
            )
            local_core = build_core(local_settings)
            local = ApiServer(local_settings, local_core)
            await local.start()
            remote_client, local_client = (
                ApiClient(f"http://127.0.0.1:{port}"),
                ApiClient(local.url),
            )
            try:
                await tg.wait_for_call("getUpdates", timeout=STARTUP)
                await _wait_for_line(api_log, "HTTP API listening", api)
                await _exercise(tg, llm, redis_repo, local_core, remote_client, local_client)
            finally:
                await remote_client.close()
                await local_client.close()
                await local.stop_accepting()
                await local.close()
                await local_core.aclose()
        finally:
            for process in processes:
                if process.returncode is None:
                    process.terminate()
            for process in processes:
                try:
                    async with asyncio.timeout(20):
                        await process.wait()
                except TimeoutError:
                    process.kill()
                    await process.wait()
    bot_text, api_text = bot_log.read_text(), api_log.read_text()
    assert "Traceback" not in bot_text + api_text, bot_text + api_text
    assert [p.returncode for p in processes] == [0, 0]  # a clean SIGTERM shutdown each
    # The polling process detected the chat's language once, for all its messages.
    assert bot_text.count("language detected") == 1, bot_text
    assert f"tg:{CHAT}: language detected: ru" in bot_text
    for name in ("bot-data", "api-data", "local-data"):
        assert conversation_files(tmp_path / name) == [], name


async def _exercise(
    tg: FakeTelegram,
    llm: FakeLLM,
    repo: RedisRepository,
    local_core: Any,
    remote: ApiClient,
    local: ApiClient,
) -> None:
    chat = ConversationId.telegram(CHAT)
    # Telegram, answered by the polling process: the chat is in Redis.
    assert await say(tg, CHAT, RU_FIRST, timeout=STARTUP) == f"ANSWER: {RU_FIRST}"
    assert await say(tg, CHAT, "/help") == RU_HELP
    assert await say(tg, CHAT, "/consult 2 куда сходить вечером") == (
        "ANSWER: куда сходить вечером\n\n"
        + texts.get("ru").ROUND.format(round=1, max_rounds=2).strip("_")
    )
    assert [(m.role, m.content) async for m in repo.iter_messages(chat)][:2] == [
        ("user", RU_FIRST),
        ("assistant", f"ANSWER: {RU_FIRST}"),
    ]
    assert chat in await repo.conversations("tg")
    # The consultation it started is seen by another process (this one's core).
    state = (await local_core.repository.get_meta(chat)).state
    assert (state.mode, state.round, state.max_rounds, state.language) == (
        "consultation",
        1,
        2,
        "ru",
    )

    # A session opened by the `membot api` process is in Redis...
    first = await remote.chat({"message": "plan my week, please", "maxRounds": 3})
    assert first.status == 200, first.body
    assert (first.body["round"], first.body["isComplete"]) == (1, False)
    sid = first.body["sessionId"]
    session = ConversationId.api(sid)
    assert session in await repo.conversations("api")
    meta = await repo.get_meta(session)
    assert (meta.state.mode, meta.state.round, meta.state.max_rounds) == ("consultation", 1, 3)
    # ...continued by another process, which sees its history and its round...
    second = await local.chat({"message": "Monday is gym day", "sessionId": sid})
    assert second.status == 200, second.body
    assert (second.body["round"], second.body["maxRounds"]) == (2, 3)
    assert prompt_texts(llm.chat_requests[-1]) == [
        ("user", "plan my week, please"),
        ("assistant", "ANSWER: plan my week, please"),
        ("user", "Monday is gym day"),
    ]
    # ...and finished by the first one, which sees the round the other one answered.
    third = await remote.chat({"message": "that is all", "sessionId": sid})
    assert third.status == 200, third.body
    assert (third.body["round"], third.body["isComplete"]) == (3, True)
    assert [m.role async for m in repo.iter_messages(session)] == ["user", "assistant"] * 3
    again = await local.chat({"message": "one more", "sessionId": sid})
    assert (again.status, again.code) == (400, "DIALOG_COMPLETED")
