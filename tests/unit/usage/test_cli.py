"""`membot usage`: the operator's totals per user and per chat, from either backend, as a
table or JSON, without any token."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from membot.ids import ConversationId
from membot.redis.client import create_client
from membot.usage import Charge
from membot.usage.files import FileLedger
from membot.usage.redis import RedisLedger
from tests.unit.config.test_settings import run_membot
from tests.unit.conftest import REDIS_URL

NOW = datetime.now(UTC)


def charge(cost: str | None, user: int, chat: int, at: datetime = NOW, cached: int = 0) -> Charge:
    return Charge(
        at=at,
        purpose="chat",
        model="m",
        prompt_tokens=10,
        completion_tokens=5,
        cached_tokens=cached,
        cost=Decimal(cost) if cost else None,
        user_id=user,
        conversation=ConversationId.telegram(chat),
    )


def test_the_table_and_json_from_files(tmp_path: Path) -> None:
    async def fill() -> None:
        ledger = FileLedger(tmp_path / "data")
        await ledger.record(charge("0.1", 1, -5, cached=5))
        await ledger.record(charge("0.2", 2, -5))
        await ledger.record(charge(None, 2, 2))
        await ledger.record(charge("9", 1, -5, at=NOW - timedelta(days=400)))  # before --since
        await ledger.close()

    asyncio.run(fill())
    env = {"DATA_DIR": str(tmp_path / "data")}
    since = (NOW - timedelta(days=1)).strftime("%Y-%m-%d")
    result = run_membot(tmp_path, env, "usage", "--since", since, "--json")
    assert result.returncode == 0, result.stderr
    rows = {(r["kind"], r["id"]): r for r in json.loads(result.stdout)["rows"]}
    assert rows[("user", "1")]["cost"] == "0.1"
    assert rows[("user", "2")]["cost"] == "0.2" and rows[("user", "2")]["unpriced_calls"] == 1
    assert rows[("chat", "tg:-5")]["cost"] == "0.3"  # exact: 0.1 + 0.2
    assert rows[("chat", "tg:-5")]["prompt_tokens"] == 20
    # The share of prompt tokens a provider's cache served.
    assert rows[("user", "1")]["cached_percent"] == 50
    table = run_membot(tmp_path, env, "usage", "--since", since)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[1].split() == [
        "kind",
        "id",
        "calls",
        "prompt",
        "completion",
        "cached",
        "cached%",
        "cost",
        "unpriced",
        "estimated",
    ]
    table_rows = [line.split() for line in lines]
    assert ["chat", "tg:-5", "2", "20", "10", "5", "25%", "0.3", "0", "0"] in table_rows


def test_redis_and_a_bad_date(tmp_path: Path, prefix: str) -> None:
    async def fill() -> None:
        client = create_client(REDIS_URL)
        try:
            await RedisLedger(client, prefix).record(charge("0.000001", 7, 7))
        finally:
            await client.aclose()

    asyncio.run(fill())
    env = {"STORAGE": "redis", "REDIS_URL": REDIS_URL, "REDIS_PREFIX": prefix}
    result = run_membot(tmp_path, env, "usage", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["rows"]
    assert {(r["kind"], r["id"], r["cost"]) for r in rows} == {
        ("user", "7", "0.000001"),
        ("chat", "tg:7", "0.000001"),
    }
    bad = run_membot(tmp_path, env, "usage", "--since", "yesterday")
    assert bad.returncode == 2 and "--since must be a date" in bad.stderr
    assert "Traceback" not in bad.stderr
