"""What each model call cost, and whom it is charged to.

Every call the model makes (chat turns, tool steps, consultations, summaries, repairs) goes
through `MeteredModel`, which records its tokens and the cost the provider reported. The call
is charged to the user and the conversation of the turn that made it: the front door sets
them with `charged_to()` for the turn, and background work the turn starts (its summary)
inherits them, as asyncio tasks copy the context they were created in.

Money is `Decimal` throughout: costs are added exactly. Periods are UTC days and months.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, Protocol

from membot.ids import ConversationId

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

Kind = Literal["user", "chat"]
ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class Payer:
    """Whom a call is charged to: a user (None for API sessions) and a conversation."""

    user_id: int | None
    conversation: ConversationId | None


_payer: ContextVar[Payer | None] = ContextVar("membot_usage_payer", default=None)


@contextlib.contextmanager
def charged_to(user_id: int | None, conversation: ConversationId | None) -> Iterator[None]:
    """Charge the model calls made inside (and in tasks started inside) to them."""
    token = _payer.set(Payer(user_id, conversation))
    try:
        yield
    finally:
        _payer.reset(token)


def current_payer() -> Payer | None:
    return _payer.get()


@dataclass(slots=True)
class Tally:
    """The tokens of the calls made inside `tallied()`, for a front door that reports them
    (the /v1 endpoint's `usage`). Closed when the block ends: what a background task started
    inside (a summary) spends later is not the turn's."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    closed: bool = False

    def add(self, prompt_tokens: int, completion_tokens: int) -> None:
        if not self.closed:
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens


_tally: ContextVar[Tally | None] = ContextVar("membot_usage_tally", default=None)


@contextlib.contextmanager
def tallied() -> Iterator[Tally]:
    """Count the tokens of the model calls made inside (ChargeWriter adds each charge)."""
    tally = Tally()
    token = _tally.set(tally)
    try:
        yield tally
    finally:
        tally.closed = True
        _tally.reset(token)


def current_tally() -> Tally | None:
    return _tally.get()


@dataclass(frozen=True, slots=True)
class Charge:
    """One model call's usage. `cost` is None when the provider reported none (and none
    could be worked out). `estimated`: the provider reported nothing, the tokens (and the
    cost) are membot's estimate (a call closed before it came, usage/estimate.py)."""

    at: datetime
    purpose: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    cost: Decimal | None = None
    user_id: int | None = None
    conversation: ConversationId | None = None
    estimated: bool = False

    def subjects(self) -> list[tuple[Kind, str]]:
        out: list[tuple[Kind, str]] = []
        if self.user_id is not None:
            out.append(("user", str(self.user_id)))
        if self.conversation is not None:
            out.append(("chat", str(self.conversation)))
        return out


@dataclass(slots=True)
class Totals:
    """Sums over some calls. `cost` adds what was reported (or estimated); `unpriced` counts
    calls without a cost, `estimated` those whose usage was estimated."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: Decimal = field(default_factory=lambda: ZERO)
    unpriced: int = 0
    estimated: int = 0

    def add(self, charge: Charge) -> None:
        self.calls += 1
        self.prompt_tokens += charge.prompt_tokens
        self.completion_tokens += charge.completion_tokens
        self.cached_tokens += charge.cached_tokens
        if charge.cost is None:
            self.unpriced += 1
        else:
            self.cost += charge.cost
        self.estimated += charge.estimated

    def merge(self, other: Totals) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.cost += other.cost
        self.unpriced += other.unpriced
        self.estimated += other.estimated

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def cached_percent(self) -> int:
        """The share of prompt tokens a provider's cache served, in whole percent."""
        if not self.prompt_tokens:
            return 0
        return round(100 * self.cached_tokens / self.prompt_tokens)

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "cached_percent": self.cached_percent,
            "cost": format(self.cost, "f"),
            "unpriced_calls": self.unpriced,
            "estimated_calls": self.estimated,
        }


def day_key(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d")


def month_key(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m")


@dataclass(frozen=True, slots=True)
class Row:
    """A line of the operator's report: one user's or one chat's totals since a day."""

    kind: Kind
    subject: str
    totals: Totals


class UsageLedger(Protocol):
    """Where charges are kept. One contract, tested over every backend
    (tests/unit/usage/test_ledger.py, its `ledgers` fixture)."""

    async def record(self, charge: Charge) -> None:
        """Add one call's usage to its user's and conversation's day and month."""
        ...

    async def totals(self, kind: Kind, subject: str, period: str) -> Totals:
        """The sums of a day ("2026-11-25") or a month ("2026-11")."""
        ...

    async def report(self, since: str, until: str) -> list[Row]:
        """Every user's and chat's sums over the days from `since` to `until` (inclusive)."""
        ...

    async def close(self) -> None: ...
