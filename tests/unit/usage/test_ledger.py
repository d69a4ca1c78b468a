"""Usage accounting and limits: one contract over both ledgers (files, Redis), the budgets
and the rate window at their edges with the time given by the test, and two processes'
clients sharing one budget and one window on Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from membot.ids import ConversationId
from membot.redis.client import create_client
from membot.usage import Charge, Limits, OverLimit, Quota, UsageLedger
from membot.usage.files import FileLedger, LocalRateWindow
from membot.usage.quota import RateWindow
from membot.usage.redis import RedisLedger, RedisRateWindow, from_units, to_units
from tests.private_files import open_to_others, usual_umask
from tests.unit.conftest import REDIS_URL

NOON = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
USER = 42
CHAT = ConversationId.telegram(-1001)


def charge(cost: str | None, *, at: datetime = NOON, user: int = USER) -> Charge:
    return Charge(
        at=at,
        purpose="chat",
        model="test/model",
        prompt_tokens=100,
        completion_tokens=20,
        cached_tokens=10,
        cost=Decimal(cost) if cost is not None else None,
        user_id=user,
        conversation=CHAT,
    )


class Clock:
    def __init__(self, now: datetime = NOON) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


Backend = Callable[[], UsageLedger]


@pytest.fixture(params=["files", "redis"])
async def ledgers(
    request: pytest.FixtureRequest, tmp_path: Path, prefix: str
) -> AsyncIterator[Backend]:
    """Make ledgers over one store, as separate processes would have them."""
    clients = []

    def make() -> UsageLedger:
        if request.param == "files":
            return FileLedger(tmp_path)
        client = create_client(REDIS_URL)
        clients.append(client)
        return RedisLedger(client, prefix)

    yield make
    for client in clients:
        await client.aclose()


async def test_costs_add_up_exactly_per_user_chat_day_and_month(ledgers: Backend) -> None:
    ledger = ledgers()
    for _ in range(10):
        await ledger.record(charge("0.1"))  # in floats, ten of these are not 1.0
    await ledger.record(charge(None))  # a provider that reports no cost: tokens only
    await ledger.record(charge("0.000000000001", at=NOON + timedelta(days=1)))
    day = await ledger.totals("user", str(USER), "2026-11-30")
    assert day.cost == Decimal("1.0") and day.calls == 11 and day.unpriced == 1
    assert (day.prompt_tokens, day.completion_tokens, day.cached_tokens) == (1100, 220, 110)
    month = await ledger.totals("chat", str(CHAT), "2026-11")
    assert month.cost == Decimal("1.0")
    assert (await ledger.totals("user", str(USER), "2026-12")).cost == Decimal("1E-12")
    assert (await ledger.totals("user", "7", "2026-11-30")).calls == 0


async def test_a_second_reader_sees_what_was_recorded(ledgers: Backend) -> None:
    first = ledgers()
    await first.record(charge("0.25"))
    await first.close()  # a process that stops writes what it counted
    again = ledgers()  # after a restart (files), or another process (Redis)
    assert (await again.totals("user", str(USER), "2026-11")).cost == Decimal("0.25")


async def test_the_report_sums_each_user_and_chat_since_a_day(ledgers: Backend) -> None:
    ledger = ledgers()
    await ledger.record(charge("1", at=NOON - timedelta(days=3)))
    await ledger.record(charge("2"))
    await ledger.record(charge("4", user=7))
    rows = {(r.kind, r.subject): r.totals for r in await ledger.report("2026-11-29", "2026-11-30")}
    assert rows[("user", str(USER))].cost == Decimal(2)
    assert rows[("user", "7")].cost == Decimal(4)
    assert rows[("chat", str(CHAT))].cost == Decimal(6)
    assert rows[("chat", str(CHAT))].calls == 2


async def test_estimated_charges_are_counted_apart_and_read_back(ledgers: Backend) -> None:
    """A stopped answer's estimate: its cost counts like a reported one, and the ledger
    says how many calls were estimated (after a restart too, and in the report)."""
    first = ledgers()
    await first.record(replace(charge("0.000123"), estimated=True))
    await first.record(charge("0.25"))
    await first.record(replace(charge(None), estimated=True))  # a model without a price
    await first.close()
    again = ledgers()
    day = await again.totals("user", str(USER), "2026-11-30")
    assert (day.calls, day.estimated, day.unpriced) == (3, 2, 1)
    assert day.cost == Decimal("0.250123")
    [row] = [r for r in await again.report("2026-11-30", "2026-11-30") if r.kind == "chat"]
    assert row.totals.to_dict()["estimated_calls"] == 2


def test_lines_written_before_estimates_were_marked_read_as_reported(tmp_path: Path) -> None:
    import asyncio

    old = (
        '{"ts":"2026-11-30T12:00:00Z","purpose":"chat","model":"test/model",'
        '"prompt_tokens":100,"completion_tokens":20,"cached_tokens":10,"cost":"0.5",'
        f'"user_id":{USER},"conversation":"{CHAT}"}}\n'
    )
    (tmp_path / "usage.jsonl").write_text(old)
    totals = asyncio.run(FileLedger(tmp_path).totals("user", str(USER), "2026-11"))
    assert (totals.calls, totals.cost, totals.estimated) == (1, Decimal("0.5"), 0)


def test_a_torn_line_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import asyncio

    async def scenario() -> None:
        first = FileLedger(tmp_path)
        await first.record(charge("0.5"))
        await first.close()
        with (tmp_path / "usage.jsonl").open("a") as f:
            f.write('{"ts": "2026-11-30T12:00:00Z", "purp')  # a crash mid-line
        assert (await FileLedger(tmp_path).totals("user", str(USER), "2026-11")).cost == Decimal(
            "0.5"
        )

    asyncio.run(scenario())
    assert "torn or corrupt" in caplog.text


def test_charges_waiting_for_their_write_survive_a_shutdown_that_skips_close(
    tmp_path: Path,
) -> None:
    """A second Ctrl-C ends `asyncio.run` without the ledger's close(): the loop cancels the
    writer while its charges wait to share a write. They are written, not lost."""
    import asyncio

    async def interrupted() -> None:
        ledger = FileLedger(tmp_path)
        await ledger.record(charge("0.25"))
        await ledger.record(charge("0.5"))

    asyncio.run(interrupted())  # returns at once: the writer is still waiting, and cancelled

    async def read() -> Decimal:
        return (await FileLedger(tmp_path).totals("user", str(USER), "2026-11")).cost

    assert asyncio.run(read()) == Decimal("0.75")


def test_redis_units_are_exact() -> None:
    for text in ("0", "0.000001234", "123456.789012345678", "1E-12"):
        value = Decimal(text)
        assert from_units(to_units(value)) == value.quantize(Decimal("1e-12"))


# ---- budgets and the rate limit -------------------------------------------------------------


def quota(
    ledger: UsageLedger, clock: Clock, window: RateWindow | None = None, **kw: object
) -> Quota:
    return Quota(Limits(**kw), ledger, window, clock)  # type: ignore[arg-type]


async def test_a_daily_budget_refuses_at_spent_equal_budget_until_midnight(
    ledgers: Backend,
) -> None:
    ledger, clock = ledgers(), Clock()
    limits = quota(ledger, clock, daily=Decimal("0.30"))
    await ledger.record(charge("0.29"))
    await limits.admit(USER)  # below: allowed (and may go over by this one request)
    await ledger.record(charge("0.01"))
    with pytest.raises(OverLimit) as refused:
        await limits.admit(USER)  # spent == budget: refused
    assert refused.value.limit == "daily"
    assert refused.value.resets_at == datetime(2026, 12, 1, tzinfo=UTC)
    await limits.admit(7)  # another user
    clock.now = datetime(2026, 12, 1, tzinfo=UTC)  # the next UTC day
    await limits.admit(USER)


async def test_a_monthly_budget_resets_on_the_first(ledgers: Backend) -> None:
    ledger, clock = ledgers(), Clock()
    limits = quota(ledger, clock, monthly=Decimal(1))
    await ledger.record(charge("0.6", at=NOON - timedelta(days=5)))
    await limits.admit(USER)
    await ledger.record(charge("0.4"))
    with pytest.raises(OverLimit) as refused:
        await limits.admit(USER)
    assert refused.value.limit == "monthly"
    assert refused.value.resets_at == datetime(2026, 12, 1, tzinfo=UTC)
    clock.now = datetime(2026, 12, 1, 0, 0, 1, tzinfo=UTC)
    await limits.admit(USER)


async def test_admins_are_exempt(ledgers: Backend) -> None:
    ledger, clock = ledgers(), Clock()
    limits = quota(ledger, clock, daily=Decimal(0), rate=1, admins=frozenset({USER}))
    for _ in range(3):
        await limits.admit(USER)


@pytest.fixture(params=["local", "redis"])
async def windows(
    request: pytest.FixtureRequest, prefix: str
) -> AsyncIterator[Callable[[int], RateWindow]]:
    clients = []
    local: dict[int, LocalRateWindow] = {}

    def make(limit: int) -> RateWindow:
        if request.param == "local":
            return local.setdefault(limit, LocalRateWindow(limit))  # one process: one window
        client = create_client(REDIS_URL)
        clients.append(client)
        return RedisRateWindow(client, prefix, limit)

    yield make
    for client in clients:
        await client.aclose()


async def test_the_rate_limit_is_a_sliding_minute_and_refusals_do_not_count(
    tmp_path: Path, windows: Callable[[int], RateWindow]
) -> None:
    clock = Clock()
    limits = quota(FileLedger(tmp_path), clock, windows(3), rate=3)
    for second in (0, 20, 40):
        clock.now = NOON + timedelta(seconds=second)
        await limits.admit(USER)
    clock.now = NOON + timedelta(seconds=59)
    for _ in range(5):  # refused, and not counted: the window still ends at 60 s
        with pytest.raises(OverLimit) as refused:
            await limits.admit(USER)
    assert refused.value.limit == "rate"
    assert refused.value.resets_at == NOON + timedelta(seconds=60)
    clock.now = NOON + timedelta(seconds=60)  # the first message leaves the window
    await limits.admit(USER)
    with pytest.raises(OverLimit):
        await limits.admit(USER)
    await limits.admit(7)


async def test_two_processes_share_one_window_on_redis(prefix: str, tmp_path: Path) -> None:
    one, two = create_client(REDIS_URL), create_client(REDIS_URL)
    try:
        clock = Clock()
        first = quota(FileLedger(tmp_path), clock, RedisRateWindow(one, prefix, 2), rate=2)
        second = quota(FileLedger(tmp_path), clock, RedisRateWindow(two, prefix, 2), rate=2)
        await first.admit(USER)
        await second.admit(USER)
        with pytest.raises(OverLimit):
            await first.admit(USER)
    finally:
        await one.aclose()
        await two.aclose()


async def test_the_outage_spool_of_charges_is_private(tmp_path: Path, prefix: str) -> None:
    from membot.redis.health import RedisHealth
    from membot.usage.spooled import SpooledLedger

    client = create_client(REDIS_URL)
    health = RedisHealth(client.ping, cooldown=3600.0)
    data_dir = tmp_path / "data"
    try:
        ledger = SpooledLedger(RedisLedger(client, prefix), health, data_dir)
        health.failed(RedisConnectionError("down"))
        with usual_umask():
            await ledger.record(charge("0.1"))
        assert (data_dir / "usage-spool.jsonl").is_file()
        assert open_to_others(data_dir) == []
    finally:
        await health.close()
        await client.aclose()


async def test_charges_made_during_an_outage_reach_redis_once_it_is_back(
    tmp_path: Path, prefix: str
) -> None:
    from membot.memory.contract.repository import StorageUnavailable
    from membot.redis.health import RedisHealth
    from membot.usage.spooled import SpooledLedger

    client = create_client(REDIS_URL)
    # The breaker of the process (membot/redis/health.py): the test probes, not its reviver.
    health = RedisHealth(client.ping, cooldown=3600.0)
    try:
        ledger = SpooledLedger(RedisLedger(client, prefix), health, tmp_path)
        await ledger.record(charge("0.1"))
        health.failed(RedisConnectionError("down"))  # kept in DATA_DIR/usage-spool.jsonl
        await ledger.record(charge("0.2"))
        await ledger.record(charge("0.3"))
        assert len((tmp_path / "usage-spool.jsonl").read_text().splitlines()) == 2
        with pytest.raises(StorageUnavailable):  # nothing waits on Redis while it is down
            await ledger.totals("user", str(USER), "2026-11")
        assert await health.recover()  # back: the next charge brings the spooled ones along
        assert (await ledger.totals("user", str(USER), "2026-11")).cost == Decimal("0.1")
        await ledger.record(charge("0.4"))
        assert (await ledger.totals("user", str(USER), "2026-11")).cost == Decimal("1.0")
        assert not (tmp_path / "usage-spool.jsonl").exists()
        await ledger.record(charge("0.5"))  # and never again
        assert (await ledger.totals("user", str(USER), "2026-11")).cost == Decimal("1.5")
    finally:
        await health.close()
        await client.aclose()
