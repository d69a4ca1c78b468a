"""The usage ledger and the limits the settings ask for, on the storage's backend."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from membot.clock import Clock
from membot.usage.files import FileLedger, LocalRateWindow
from membot.usage.ledger import UsageLedger
from membot.usage.quota import Limits, Quota, RateWindow

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from membot.config import Settings
    from membot.memory.health import RedisHealth

log = logging.getLogger(__name__)


def limits_of(settings: Settings) -> Limits:
    return Limits(
        daily=settings.user_daily_budget,
        monthly=settings.user_monthly_budget,
        rate=settings.user_rate_limit,
        admins=settings.admin_user_ids,
    )


def build_usage(
    settings: Settings, client: Redis | None, clock: Clock, health: RedisHealth | None = None
) -> tuple[UsageLedger, Quota]:
    """With Redis (the process's one client, membot.wiring) the counters are shared by every
    process (the limits hold exactly across them); with files they are this process's. With
    the health object (QUEUE=local), charges made while Redis is down are spooled."""
    window: RateWindow | None = None
    ledger: UsageLedger
    if client is not None:
        from membot.usage.redis import RedisLedger, RedisRateWindow

        ledger = RedisLedger(client, settings.redis_prefix)
        if health is not None:  # the bot answers through outages: so does accounting
            from membot.usage.spooled import SpooledLedger

            ledger = SpooledLedger(ledger, health, settings.data_dir)
        if settings.user_rate_limit is not None:
            window = RedisRateWindow(client, settings.redis_prefix, settings.user_rate_limit)
    else:
        ledger = FileLedger(settings.data_dir)
        if settings.user_rate_limit is not None:
            window = LocalRateWindow(settings.user_rate_limit)
    return ledger, Quota(limits_of(settings), ledger, window, clock)
