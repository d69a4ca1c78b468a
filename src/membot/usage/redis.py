"""The usage ledger and the rate window on Redis (STORAGE=redis): shared by every process.

Sums are hashes, one per subject and period: `{p}usage:user:42:2026-11-25`,
`{p}usage:chat:tg:-100:2026-11`, with the fields `calls`, `prompt`, `completion`, `cached`,
`unpriced`, `estimated` and `cost` (a field never added to is absent: 0). Cost is kept as an
integer count of 10^-12 of the provider's currency (HINCRBY is exact; a float would not be);
costs finer than that are rounded to it.
One charge updates its (up to) four hashes in one MULTI, so no reader sees half of it. Each
day has an index set of its subjects (`{p}usage:days:2026-11-25`) for `membot usage`. Days
are kept 400 days, months 800.

The rate window is a sorted set per user (`{p}usage:rate:42`) of the last minute's
messages, checked and added to in one Lua script.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import TYPE_CHECKING

from membot.redis.errors import unavailable
from membot.usage.ledger import Charge, Kind, Row, Totals, day_key, month_key

if TYPE_CHECKING:
    from redis.asyncio import Redis

UNIT = Decimal("1e-12")
DAY_TTL = 400 * 86400
MONTH_TTL = 800 * 86400


def to_units(cost: Decimal) -> int:
    return int(cost.quantize(UNIT, rounding=ROUND_HALF_EVEN).scaleb(12))


def from_units(units: int) -> Decimal:
    return (Decimal(units) * UNIT).normalize() if units else Decimal(0)


class RedisLedger:
    def __init__(self, client: Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix

    def key(self, kind: Kind, subject: str, period: str) -> str:
        return f"{self.prefix}usage:{kind}:{subject}:{period}"

    async def record(self, charge: Charge) -> None:
        day, month = day_key(charge.at), month_key(charge.at)
        fields = {
            "calls": 1,
            "prompt": charge.prompt_tokens,
            "completion": charge.completion_tokens,
            "cached": charge.cached_tokens,
        }
        if charge.cost is None:
            fields["unpriced"] = 1
        else:
            fields["cost"] = to_units(charge.cost)
        if charge.estimated:
            fields["estimated"] = 1
        async with self.client.pipeline(transaction=True) as pipe:
            for kind, subject in charge.subjects():
                for period, ttl in ((day, DAY_TTL), (month, MONTH_TTL)):
                    key = self.key(kind, subject, period)
                    for name, amount in fields.items():
                        if amount:
                            pipe.hincrby(key, name, amount)
                    pipe.expire(key, ttl)
                index = f"{self.prefix}usage:days:{day}"
                pipe.sadd(index, f"{kind}:{subject}")
                pipe.expire(index, DAY_TTL)
            with unavailable("usage"):
                await pipe.execute()

    async def totals(self, kind: Kind, subject: str, period: str) -> Totals:
        with unavailable("usage"):
            return _totals(await self.client.hgetall(self.key(kind, subject, period)))

    async def report(self, since: str, until: str) -> list[Row]:
        day, last = date.fromisoformat(since), date.fromisoformat(until)
        sums: dict[tuple[Kind, str], Totals] = {}
        while day <= last:
            period = day.isoformat()
            with unavailable("usage"):
                members = await self.client.smembers(f"{self.prefix}usage:days:{period}")
            for member in sorted(m.decode() if isinstance(m, bytes) else m for m in members):
                kind_text, subject = member.split(":", 1)
                kind: Kind = "user" if kind_text == "user" else "chat"
                found = await self.totals(kind, subject, period)
                sums.setdefault((kind, subject), Totals()).merge(found)
            day += timedelta(days=1)
        return [Row(kind, subject, totals) for (kind, subject), totals in sorted(sums.items())]

    async def close(self) -> None:
        return None  # the client is the process's (membot.wiring closes it)


def _totals(raw: dict[bytes | str, bytes | str]) -> Totals:
    values = {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in raw.items()}
    return Totals(
        calls=values.get("calls", 0),
        prompt_tokens=values.get("prompt", 0),
        completion_tokens=values.get("completion", 0),
        cached_tokens=values.get("cached", 0),
        cost=from_units(values.get("cost", 0)),
        unpriced=values.get("unpriced", 0),
        estimated=values.get("estimated", 0),
    )


# KEYS[1]: the user's window. ARGV: now (ms), the window (ms), the limit, a unique member.
# Returns -1 when the message is counted, else the ms until the oldest leaves the window.
_HIT = """
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(oldest[2]) + window - now)
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], window)
return -1
"""


class RedisRateWindow:
    """A sliding 60-second window per user, exact across processes. The time is the
    caller's (the app's clock), so tests can move it; machines' clocks must agree to well
    under a second, as NTP keeps them."""

    WINDOW_MS = 60_000

    def __init__(self, client: Redis, prefix: str, limit: int) -> None:
        self.prefix = prefix
        self.limit = limit
        self._hit = client.register_script(_HIT)

    async def hit(self, user_id: int, now: datetime) -> float | None:
        ms = int(now.timestamp() * 1000)
        with unavailable("rate limit"):
            wait = int(
                await self._hit(
                    keys=[f"{self.prefix}usage:rate:{user_id}"],
                    args=[ms, self.WINDOW_MS, self.limit, f"{ms}-{uuid.uuid4().hex[:8]}"],
                )
            )
        return None if wait < 0 else wait / 1000
