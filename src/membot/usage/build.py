"""The usage ledger and the limits the settings ask for, on the storage's backend."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from membot.clock import Clock
from membot.redis.health import ALWAYS_UP, Health, RedisHealth
from membot.usage.files import FileLedger, LocalRateWindow
from membot.usage.ledger import UsageLedger
from membot.usage.quota import Limits, Quota, RateWindow

if TYPE_CHECKING:
    from membot.config import LimitSettings
    from membot.redis.client import Redis

log = logging.getLogger(__name__)


def limits_of(limits: LimitSettings) -> Limits:
    return Limits(
        daily=limits.user_daily_budget,
        monthly=limits.user_monthly_budget,
        rate=limits.user_rate_limit,
        admins=limits.admin_user_ids,
    )


def build_usage(
    limits: LimitSettings,
    data_dir: Path,
    redis: tuple[Redis, str] | None,
    clock: Clock,
    health: Health = ALWAYS_UP,
) -> tuple[UsageLedger, Quota]:
    """With Redis (the process's one client, membot.wiring) the counters are shared by every
    process (the limits hold exactly across them); with files they are this process's. With
    the breaker as the health object (QUEUE=local), charges made while Redis is down are
    spooled."""
    window: RateWindow | None = None
    ledger: UsageLedger
    rate = limits.user_rate_limit
    if redis is not None:
        from membot.usage.redis import RedisLedger, RedisRateWindow

        client, prefix = redis
        ledger = RedisLedger(client, prefix)
        if isinstance(health, RedisHealth):  # the bot answers through outages: so does accounting
            from membot.usage.spooled import SpooledLedger

            ledger = SpooledLedger(ledger, health, data_dir)
        if rate is not None:
            window = RedisRateWindow(client, prefix, rate)
    else:
        ledger = FileLedger(data_dir)
        if rate is not None:
            window = LocalRateWindow(rate)
    return ledger, Quota(limits_of(limits), ledger, window, clock)
