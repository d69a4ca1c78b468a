"""The one wall clock: `utc_now()`, and `Clock`, the type of anything that can stand in for it
(tests pass a clock they move by hand). Monotonic time, for timeouts and cool-downs, is
`time.monotonic` and is called that where it is used."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """Now, in UTC, at millisecond precision: the precision every store keeps (`iso` in
    memory/contract/models.py), so a time made here reads back equal to itself."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)
