"""Shared fixtures: real fake servers on 127.0.0.1 and the real bot polling them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from membot.bot.drafts import TELEGRAM_PACING, DraftPacing
from membot.config import Settings, load_settings
from membot.core.summarizer import INSTRUCTIONS
from membot.roles.process import Process
from tests.fakes import FakeLLM, FakeTelegram
from tests.fakes.process import membot_env

TOKEN = "4242:TEST-TOKEN"
API_KEY = "sk-test-key"
SUMMARIZER_MARKER = INSTRUCTIONS.split(".")[0]


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as server:
        yield server


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM(api_key=API_KEY) as server:
        # Chat prompts mention "summary" once one exists; only the summarizer's own
        # instructions mark a summarization request.
        server.summary_marker = SUMMARIZER_MARKER
        yield server


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def bot_env(tg: FakeTelegram, llm: FakeLLM, data_dir: Path, **settings: str) -> dict[str, str]:
    """The environment of a real `membot` process against these fakes (`test/model`, WARNING
    logs, `data_dir`); `settings` add to it or override it (lower-case names)."""
    return membot_env(
        **{
            "telegram_bot_token": TOKEN,
            "telegram_api_base": tg.base_url,
            "openrouter_api_key": API_KEY,
            "openrouter_base_url": llm.base_url,
            "openrouter_model": "test/model",
            "data_dir": str(data_dir),
            "log_level": "WARNING",
            **settings,
        }
    )


@pytest.fixture
def make_settings(tg: FakeTelegram, llm: FakeLLM, data_dir: Path) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "telegram_bot_token": TOKEN,
            "telegram_api_base": tg.base_url,
            "openrouter_api_key": API_KEY,
            "openrouter_base_url": llm.base_url,
            "openrouter_model": "test/model",
            "data_dir": data_dir,
            "llm_timeout": 5.0,
            # Telegram's pace would make every test of a few messages in one chat wait about
            # a second per message; tests/e2e/test_rate_limits.py sets its own.
            "telegram_chat_rate": 1000.0,
            "telegram_chat_burst": 100,
            "telegram_group_rate": 60_000.0,
        }
        values.update(overrides)
        return load_settings(_env_file=None, **values)

    return make


@dataclass
class RunningBot:
    app: Process
    task: asyncio.Task[None]

    async def stop(self) -> None:
        if not self.task.done():
            await self.app.stop()
        await self.task


StartBot = Callable[..., Awaitable[RunningBot]]


@pytest.fixture
async def start_bot(
    tg: FakeTelegram, make_settings: Callable[..., Settings]
) -> AsyncIterator[StartBot]:
    """Start the real bot (its real polling loop) against the fakes; stopped at teardown.
    `drafts`: the drafts' pacing (Telegram's unless a test of something else speeds it up)."""
    running: list[RunningBot] = []

    async def start(drafts: DraftPacing = TELEGRAM_PACING, **overrides: Any) -> RunningBot:
        polls_before = tg.call_count("getUpdates")
        app = Process(make_settings(**overrides), drafts=drafts)
        task = asyncio.create_task(app.run(handle_signals=False))
        bot = RunningBot(app, task)
        running.append(bot)
        # Ready once it is long-polling: updates pushed from now on will be seen.
        await tg.wait_for_call("getUpdates", count=polls_before + 1)
        return bot

    yield start
    for bot in reversed(running):
        await bot.stop()
