"""Fixtures of the unit tests: the in-memory backend, the scripted model, and Redis (the real
one at 127.0.0.1:6379, under a key prefix of each test's own)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from pydantic import SecretStr
from redis.asyncio import Redis

from membot.config import LlmSettings
from membot.memory import MemoryRepository
from membot.memory.redis import RedisRepository
from membot.redis.client import create_client
from tests.conftest import TOKEN
from tests.fakes import FakeTelegram
from tests.scripted import ScriptedModel

REDIS_URL = "redis://127.0.0.1:6379/0"

MakeRepo = Callable[..., RedisRepository]


def llm_settings(base_url: str, api_key: str) -> LlmSettings:
    """The model's settings for a test against a fake OpenRouter: one model, no retries."""
    return LlmSettings(
        api_key=SecretStr(api_key),
        base_url=base_url,
        default_model="test/model",
        models=(),
        model_choices=("test/model",),
        timeout=5.0,
        enable_retry=False,
        web_search=False,
    )


@pytest.fixture
def repo() -> MemoryRepository:
    """The in-memory backend; modules that test the file backend define their own `repo`."""
    return MemoryRepository()


@pytest.fixture
async def bot(tg: FakeTelegram) -> AsyncIterator[Bot]:
    """An aiogram Bot talking to the fake Telegram (`tg`)."""
    session = AiohttpSession(api=TelegramAPIServer.from_base(tg.base_url))
    bot = Bot(token=TOKEN, session=session)
    yield bot
    await bot.session.close()


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    """A scripted model that fails the test if it got requests the test did not script."""
    scripted = ScriptedModel()
    yield scripted
    assert not scripted.unexpected, "the model got requests the test did not script"


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    """A Redis key prefix of this test's own; every key under it is deleted afterwards."""
    prefix = f"membot-test:{uuid.uuid4().hex}:"
    yield prefix
    client = Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture
async def make_repo(prefix: str) -> AsyncIterator[MakeRepo]:
    """RedisRepository instances under this test's prefix, each with its own pool (as
    separate processes would have), closed afterwards."""
    made: list[RedisRepository] = []

    def make(**kw: int) -> RedisRepository:
        made.append(RedisRepository(create_client(REDIS_URL), prefix=prefix, **kw))
        return made[-1]

    yield make
    for repo in made:
        await repo.close()
