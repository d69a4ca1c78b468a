"""The one wall clock: `utc_now()`, times as stored (`iso`, `parse_iso`), and `Clock`, the
type of anything that can stand in for it (tests pass a clock they move by hand). Monotonic
time, for timeouts and cool-downs, is `time.monotonic` and is called that where it is used."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def iso(ts: datetime) -> str:
    """A time as every store writes it: UTC, milliseconds, "Z"."""
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(value: str) -> datetime:
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    # A time without a zone (a hand-edited or imported line) is UTC, as membot writes them;
    # left naive, comparing it with an aware one would fail every read of the chat.
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def utc_now() -> datetime:
    """Now, in UTC, at millisecond precision: the precision every store keeps (`iso` in
    memory/contract/models.py), so a time made here reads back equal to itself."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)
