"""Fixtures of the end-to-end tests on Redis."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from membot.memory.redis import RedisRepository
from membot.redis.client import create_client

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
async def redis_repo() -> AsyncIterator[RedisRepository]:
    """A reader of this test's own prefix (as an operator would look into Redis); every key
    under the prefix is deleted afterwards."""
    prefix = f"membot-test:{uuid.uuid4().hex}:"
    repo = RedisRepository(create_client(REDIS_URL), prefix=prefix)
    yield repo
    keys = [key async for key in repo.client.scan_iter(match=f"{prefix}*")]
    if keys:
        await repo.client.delete(*keys)
    await repo.close()
