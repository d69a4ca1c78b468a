"""Telegram's limits on what the bot sends, shared by every process of one bot.

Telegram allows about one message per second per chat (short bursts pass), 20 per minute per
group and 30 per second per bot, and answers 429 with `retry_after` beyond them. Each limit is
a GCRA (generic cell rate algorithm: one "theoretical arrival time" per key, no counters to
reset): a send may go when every limit that applies allows it, and then counts against all
of them at once. With Redis the state lives under `{REDIS_PREFIX}tg:rate:*` and the clock is
Redis's TIME, so processes on several machines pace one bot together; a 429 pauses the chat
for all of them (`{REDIS_PREFIX}tg:pause:<chat>`). Without Redis, or while it fails, each
process paces itself alone: a limit must never stop an answer.

A draft (sendMessageDraft, an answer shown while it is written) is a call Telegram counts
too, but only a preview: it takes from the bot-wide budget without ever waiting (`spare`),
and only while that budget is at most half spent, so that drafts never hold up a message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from membot.errors import StorageUnavailable
from membot.redis.errors import unavailable

if TYPE_CHECKING:
    from membot.config import TelegramSettings
    from membot.redis.client import Redis

log = logging.getLogger(__name__)

US = 1_000_000  # the GCRA state is kept in integer microseconds (exact in Lua's doubles)


@dataclass(frozen=True, slots=True)
class Rule:
    """One limit: a send every `interval` µs on average; `tolerance` µs of burst ahead."""

    interval: int
    tolerance: int

    @classmethod
    def per_second(cls, rate: float, burst: int) -> Rule:
        interval = round(US / rate)
        return cls(interval, (burst - 1) * interval)


@dataclass(frozen=True, slots=True)
class Rates:
    chat: Rule
    group: Rule
    bot: Rule

    @classmethod
    def of(cls, telegram: TelegramSettings) -> Rates:
        burst = telegram.chat_burst
        bot_rate = telegram.bot_rate
        return cls(
            chat=Rule.per_second(telegram.chat_rate, burst),
            group=Rule.per_second(telegram.group_rate / 60.0, burst),
            # The bot-wide limit is per second: up to a second's worth may go at once.
            bot=Rule.per_second(bot_rate, max(1, int(bot_rate))),
        )

    def spare(self) -> list[tuple[str, Rule]]:
        """The rule a draft goes by: the bot-wide budget, of which it may use only the first
        half of the burst (at least one send is always left for messages)."""
        rule = self.bot
        keep = max(1, (rule.tolerance // rule.interval + 1) // 2)  # sends kept for messages
        return [("bot", Rule(rule.interval, rule.tolerance - keep * rule.interval))]

    def for_chat(self, chat_id: int) -> list[tuple[str, Rule]]:
        """(key suffix, rule) of every limit a send to this chat counts against."""
        rules = [(f"chat:{chat_id}", self.chat), ("bot", self.bot)]
        if chat_id < 0:  # groups, supergroups and channels have negative ids
            rules.append((f"group:{chat_id}", self.group))
        return rules


def gcra(
    state: dict[str, int], rules: list[tuple[str, Rule]], now: int
) -> tuple[int, dict[str, int]]:
    """(µs to wait, 0 when the send may go; the new arrival times to store if it goes)."""
    wait = 0
    new: dict[str, int] = {}
    for key, rule in rules:
        tat = max(state.get(key, now), now)
        wait = max(wait, tat - now - rule.tolerance)
        new[key] = tat + rule.interval
    return wait, new


class SendLimits(Protocol):
    """Telegram's limits on sending (GCRA), per chat and for the whole bot: the send path asks
    before each message. Not usage.Limits (the users' budgets)."""

    async def acquire(self, chat_id: int) -> None:
        """Wait until a message may be sent to the chat, and count it."""

    async def pause(self, chat_id: int, seconds: float) -> None:
        """Telegram said 429: nothing goes to the chat for that long."""

    async def spare(self, chat_id: int) -> bool:
        """For a send that may be skipped but must not wait (a draft): True when it is
        counted and may go now (Rates.spare), False at once otherwise."""


class LocalLimits:
    """One process's limits, on its monotonic clock."""

    def __init__(self, rates: Rates, clock: Callable[[], float] = time.monotonic) -> None:
        self.rates = rates
        self.clock = clock
        self._state: dict[str, int] = {}
        self._paused: dict[int, int] = {}

    def _now(self) -> int:
        return int(self.clock() * US)

    def try_acquire(self, chat_id: int, rules: list[tuple[str, Rule]] | None = None) -> int:
        """µs to wait before trying again; 0: the send is counted and may go."""
        now = self._now()
        paused = self._paused.get(chat_id, 0) - now
        if paused > 0:
            return paused
        self._paused.pop(chat_id, None)
        wait, new = gcra(self._state, rules or self.rates.for_chat(chat_id), now)
        if wait <= 0:
            self._state.update(new)
            if len(self._state) > 10_000:  # keys whose time has passed carry no state
                self._state = {k: v for k, v in self._state.items() if v > now}
        return max(wait, 0)

    async def acquire(self, chat_id: int) -> None:
        while True:
            wait = self.try_acquire(chat_id)
            if wait <= 0:
                return
            await asyncio.sleep(wait / US)  # the pace itself, not a wait for some event

    async def spare(self, chat_id: int) -> bool:
        return self.try_acquire(chat_id, self.rates.spare()) == 0

    async def pause(self, chat_id: int, seconds: float) -> None:
        until = self._now() + int(seconds * US)
        self._paused[chat_id] = max(self._paused.get(chat_id, 0), until)


# KEYS[1]: the chat's pause key; KEYS[2..]: one GCRA key per limit.
# ARGV[1]: now in µs, or "" for Redis's clock; then (interval, tolerance) per GCRA key.
# Returns µs to wait (0: the send is counted and may go).
_ACQUIRE = """
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local paused = redis.call('PTTL', KEYS[1])
if paused > 0 then return paused * 1000 end
local wait = 0
local tats = {}
for i = 2, #KEYS do
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  tats[i] = tat
  local w = tat - now - tonumber(ARGV[2 * i - 1])
  if w > wait then wait = w end
end
if wait > 0 then return math.ceil(wait) end
for i = 2, #KEYS do
  local interval = tonumber(ARGV[2 * i - 2])
  local tolerance = tonumber(ARGV[2 * i - 1])
  local tat = tats[i] + interval
  local ttl = math.ceil((tat - now + tolerance) / 1000) + 1000
  redis.call('SET', KEYS[i], string.format('%d', tat), 'PX', ttl)
end
return 0
"""
# A pause only grows: a shorter retry_after seen later does not cut a longer one short.
_PAUSE = """
local ms = tonumber(ARGV[1])
if redis.call('PTTL', KEYS[1]) < ms then redis.call('SET', KEYS[1], '1', 'PX', ms) end
return 1
"""


class RedisLimits:
    """Limits shared through Redis. While Redis fails, this process paces itself (one warning,
    and one line when sharing resumes)."""

    def __init__(self, client: Redis, prefix: str, rates: Rates) -> None:
        self.client = client
        self.prefix = prefix
        self.rates = rates
        self.local = LocalLimits(rates)
        self._acquire = client.register_script(_ACQUIRE)
        self._pause = client.register_script(_PAUSE)
        self._degraded = False

    async def try_acquire(
        self, chat_id: int, now: int | None = None, rules: list[tuple[str, Rule]] | None = None
    ) -> int:
        """µs to wait (0: counted). `now` (µs) replaces Redis's clock in tests.
        StorageUnavailable when Redis failed."""
        rules = rules or self.rates.for_chat(chat_id)
        keys = [f"{self.prefix}tg:pause:{chat_id}"]
        args: list[int | str] = ["" if now is None else now]
        for suffix, rule in rules:
            keys.append(f"{self.prefix}tg:rate:{suffix}")
            args += [rule.interval, rule.tolerance]
        with unavailable("Telegram limits"):
            return int(await self._acquire(keys=keys, args=args))

    async def acquire(self, chat_id: int) -> None:
        while True:
            try:
                wait = await self.try_acquire(chat_id)
            except StorageUnavailable as exc:
                self._fell_back(exc)
                await self.local.acquire(chat_id)
                return
            self._shared_again()
            if wait <= 0:
                return
            await asyncio.sleep(wait / US)

    async def spare(self, chat_id: int, now: int | None = None) -> bool:
        try:
            wait = await self.try_acquire(chat_id, now, self.rates.spare())
        except StorageUnavailable as exc:
            self._fell_back(exc)
            return await self.local.spare(chat_id)
        self._shared_again()
        return wait <= 0

    async def pause(self, chat_id: int, seconds: float) -> None:
        await self.local.pause(chat_id, seconds)
        try:
            with unavailable("Telegram limits"):
                await self._pause(
                    keys=[f"{self.prefix}tg:pause:{chat_id}"], args=[max(1, int(seconds * 1000))]
                )
        except StorageUnavailable as exc:
            self._fell_back(exc)

    def _fell_back(self, exc: StorageUnavailable) -> None:
        if not self._degraded:
            self._degraded = True
            log.warning(
                "Telegram rate limits: Redis failed (%s); this process paces itself alone",
                type(exc.__cause__ or exc).__name__,
            )

    def _shared_again(self) -> None:
        if self._degraded:
            self._degraded = False
            log.info("Telegram rate limits: shared through Redis again")


def build_limits(telegram: TelegramSettings, shared: tuple[Redis, str] | None) -> SendLimits:
    """Telegram's limits; `shared` (a Redis client and the key prefix) when every process
    answers from one queue (QUEUE=redis) and so must count the same sends."""
    rates = Rates.of(telegram)
    if shared is not None:
        return RedisLimits(shared[0], shared[1], rates)
    return LocalLimits(rates)
