"""A period to search in, from the ISO dates the model (or an operator) writes."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from membot.errors import MembotError

FORMAT_HINT = "an ISO date like 2025-06-01 (or a time like 2025-06-01T18:30, UTC unless given)"


class BadPeriod(MembotError, ValueError):
    """A date that cannot be read, or a period that ends before it starts (the message says
    which and the format expected: the tool gives it to the model, the CLI to the shell)."""


def utc(when: datetime) -> datetime:
    """`when` as an aware datetime: a naive one is UTC (as membot writes every time)."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def parse_period(since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """`since` and `until` as the index wants them: aware datetimes, `since` inclusive,
    `until` exclusive. Both days are inclusive as written: until=2025-08-31 takes in the
    whole of August 31st."""
    start = _parse("since", since, end=False)
    end = _parse("until", until, end=True)
    if start is not None and end is not None and end <= start:
        raise BadPeriod(f"until ({until}) must be later than since ({since})")
    return start, end


def _parse(name: str, value: str | None, *, end: bool) -> datetime | None:
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        if len(text) == 10:  # a day
            day = datetime.combine(date.fromisoformat(text), datetime.min.time(), UTC)
            return day + timedelta(days=1) if end else day
        moment = datetime.fromisoformat(text)
        return utc(moment).astimezone(UTC)
    except OverflowError:
        # Past the calendar's ends (the day after 9999-12-31, year 1 in another zone): no
        # archive reaches there, so it bounds nothing.
        return None
    except ValueError:
        raise BadPeriod(f"{name} must be {FORMAT_HINT}, not {value!r}") from None
