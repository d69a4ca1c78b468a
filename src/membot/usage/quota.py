"""Budgets and the rate limit: checked before a message goes to the model.

A user whose spending in the current UTC day (or month) has reached USER_DAILY_BUDGET (or
USER_MONTHLY_BUDGET) is refused, as is one who sent USER_RATE_LIMIT messages to the model in
the last 60 seconds. A refusal says which limit and when it resets; nothing is sent to the
model and nothing is stored, and a refused message does not count toward the rate limit.
The check happens before the call and the charge (the reported cost) after it, so a user can
go over a budget by at most one request. ADMIN_USER_IDS are exempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Literal, Protocol

from membot.clock import Clock
from membot.errors import MembotError
from membot.usage.ledger import UsageLedger, day_key, month_key

Limit = Literal["daily", "monthly", "rate"]


class OverLimit(MembotError):
    """The user may not send this message to the model now."""

    def __init__(self, limit: Limit, resets_at: datetime) -> None:
        super().__init__(f"{limit} limit reached; resets at {resets_at.isoformat()}")
        self.limit = limit
        self.resets_at = resets_at


class RateWindow(Protocol):
    async def hit(self, user_id: int, now: datetime) -> float | None:
        """Count a message (None), or the seconds until one is allowed (nothing counted)."""
        ...


@dataclass(frozen=True, slots=True)
class Limits:
    daily: Decimal | None = None
    monthly: Decimal | None = None
    rate: int | None = None
    admins: frozenset[int] = frozenset()

    @property
    def any(self) -> bool:
        return self.daily is not None or self.monthly is not None or self.rate is not None


def next_day(now: datetime) -> datetime:
    start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return start + timedelta(days=1)


def next_month(now: datetime) -> datetime:
    now = now.astimezone(UTC)
    year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


class Quota:
    def __init__(
        self, limits: Limits, ledger: UsageLedger, window: RateWindow | None, clock: Clock
    ) -> None:
        self.limits = limits
        self.ledger = ledger
        self.window = window
        self.clock = clock

    async def admit(self, user_id: int | None) -> None:
        """Raise OverLimit, or let the message through (counting it in the rate window)."""
        limits = self.limits
        if user_id is None or user_id in limits.admins or not limits.any:
            return
        now = self.clock()
        subject = str(user_id)
        if limits.daily is not None:
            spent = (await self.ledger.totals("user", subject, day_key(now))).cost
            if spent >= limits.daily:
                raise OverLimit("daily", next_day(now))
        if limits.monthly is not None:
            spent = (await self.ledger.totals("user", subject, month_key(now))).cost
            if spent >= limits.monthly:
                raise OverLimit("monthly", next_month(now))
        # Last: a message refused for a budget is not counted in the window.
        if limits.rate is not None and self.window is not None:
            wait = await self.window.hit(user_id, now)
            if wait is not None:
                raise OverLimit("rate", now + timedelta(seconds=wait))
