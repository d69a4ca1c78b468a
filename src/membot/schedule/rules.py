"""A task's times: `when` read in the chat's zone, an RRULE checked, the next time worked out.

Times the model gives are ISO 8601 date-times: with an offset or "Z" they are absolute,
without one they are in the chat's zone. A repeating task's rule is read by python-dateutil
from its anchor (the local date-time it was first set for). Rules of a day or longer repeat
on the wall clock of the task's zone ("every day at 9" is at 9 before and after a
daylight-saving change); rules in hours, minutes or seconds repeat in elapsed time (every
2 hours is 2 hours apart across the change too), unless they name hours, days or any other
part of the calendar (BYHOUR=9,13,17; BYDAY=MO): those are the zone's, so such a rule is
walked on its wall clock too. A local time a change skips (02:30 on the night clocks go
forward) is refused for `when`, and moved past the gap for a repetition (two times the gap
makes one are one time).
A rule's UNTIL is in UTC with "Z", else on the zone's wall clock, whichever clock it walks.

Every refusal is a `BadSchedule` whose message is for the model to fix or explain."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import MAXYEAR, UTC, datetime, timedelta
from itertools import islice, pairwise, takewhile
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.rrule import rrule, rrulestr

from membot.errors import MembotError

# How many of a rule's coming times are checked against the shortest interval.
CHECKED_TIMES = 500


class BadSchedule(MembotError, ValueError):
    """A time, zone or rule that cannot be scheduled; the message says why."""


def zone_named(name: str) -> ZoneInfo:
    """The IANA zone `name` ("Europe/Berlin"), or BadSchedule."""
    cleaned = name.strip() if isinstance(name, str) else ""
    try:
        if not cleaned or cleaned.startswith(("/", ".")) or ".." in cleaned:
            raise ValueError(cleaned)
        return ZoneInfo(cleaned)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadSchedule(
            f"unknown time zone {name!r}: use an IANA name such as Europe/Berlin or UTC"
        ) from None


def local_to_utc(local: datetime, zone: ZoneInfo, *, strict: bool) -> datetime:
    """A wall-clock time in `zone` as UTC. A time the zone skips (clocks going forward) is a
    BadSchedule when `strict`, else it is read with the offset before the change (02:30
    becomes 03:30). A time the zone has twice (clocks going back) is its first."""
    aware = local.replace(tzinfo=zone, fold=0)
    utc = aware.astimezone(UTC)
    if strict and utc.astimezone(zone).replace(tzinfo=None) != local:
        raise BadSchedule(
            f"{local.isoformat(timespec='minutes')} does not exist in {zone.key} (the clocks "
            "skip it for daylight saving time): pick another time"
        )
    return utc


def parse_when(when: str, zone: ZoneInfo, now: datetime) -> tuple[datetime, datetime]:
    """(the time in UTC, the same time on the zone's wall clock, without a zone), in whole
    seconds. Refused: text that is not an ISO 8601 date-time, a date without a time, a time
    that does not exist in the zone, a time not after `now`."""
    text = when.strip() if isinstance(when, str) else ""
    try:
        parsed = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        raise BadSchedule(
            f"{when!r} is not an ISO 8601 date-time (or that date does not exist): write "
            "it like 2026-03-14T09:00, in the chat's time zone, or with an offset"
        ) from None
    if "T" not in text.upper() and " " not in text:
        raise BadSchedule(f"{when!r} has no time of day: write it like {text}T09:00")
    if parsed.tzinfo is None:
        utc = local_to_utc(parsed, zone, strict=True)
        local = parsed
    else:
        utc = parsed.astimezone(UTC)
        local = utc.astimezone(zone).replace(tzinfo=None)
    # Whole seconds, as a rule's times are (dateutil drops a start's fraction): 09:00:00.5
    # repeating daily is 09:00 from today, not from tomorrow.
    utc, local = utc.replace(microsecond=0), local.replace(microsecond=0)
    if utc <= now:
        said = now.astimezone(zone).isoformat(timespec="seconds")
        raise BadSchedule(f"{when!r} is in the past: it is {said} now in {zone.key}")
    return utc, local


_UNTIL = re.compile(r"UNTIL=(\d{8})(T\d{6})?(Z?)", re.IGNORECASE)
_ENDS = frozenset({"COUNT", "UNTIL"})
_COUNT = re.compile(r"COUNT=(\d+)", re.IGNORECASE)
# The Gregorian calendar repeats every 400 years (146,097 days, a whole number of weeks):
# a rule walked from a start 400·n years later has the same times, 400·n years later.
CYCLE = 400


def _rule_text(repeat: str) -> str:
    text = repeat.strip() if isinstance(repeat, str) else ""
    if text.upper().startswith("RRULE:"):
        text = text[6:]
    if not text or "\n" in text or "DTSTART" in text.upper():
        raise ValueError("one RRULE line, without DTSTART")
    return text


def _rule(text: str, start: datetime, frame: ZoneInfo, zone: ZoneInfo) -> rrule:
    """The rule walked on `frame`'s clock from `start`. Its UNTIL is in UTC (with "Z") or on
    the zone's wall clock (without), and is moved onto the frame's clock."""

    def on_frame(match: re.Match[str]) -> str:
        day, time, utc_mark = match.groups()
        stamp = datetime.strptime(day + (time or "T000000").upper(), "%Y%m%dT%H%M%S")
        if utc_mark:
            moment = stamp.replace(tzinfo=UTC)
        elif frame.key == zone.key:
            return match.group(0)
        else:
            moment = local_to_utc(stamp, zone, strict=False)
        return "UNTIL=" + moment.astimezone(frame).strftime("%Y%m%dT%H%M%S")

    parsed = rrulestr(_UNTIL.sub(on_frame, text), dtstart=start)
    if not isinstance(parsed, rrule):
        raise ValueError("a single rule")
    return parsed


_FREQ = re.compile(r"FREQ=([A-Z]+)", re.IGNORECASE)
_SUB_DAILY_NAMES = frozenset({"HOURLY", "MINUTELY", "SECONDLY"})
_UTC = ZoneInfo("UTC")


def _frame(text: str, anchor: datetime, zone: ZoneInfo) -> tuple[datetime, ZoneInfo]:
    """Where the rule is walked from, and on which clock: sub-daily rules in UTC (elapsed
    time), others, and sub-daily ones with a BY part (its hours and days are the zone's),
    on the zone's wall clock."""
    freq = _FREQ.search(text)
    named = any(part.strip().upper().startswith("BY") for part in text.split(";"))
    if freq is not None and freq.group(1).upper() in _SUB_DAILY_NAMES and not named:
        return local_to_utc(anchor, zone, strict=False).replace(tzinfo=None), _UTC
    return anchor, zone


def _walked(repeat: str, anchor: datetime, zone: ZoneInfo) -> tuple[rrule, ZoneInfo]:
    """The rule as it is walked, and the clock it is walked on."""
    text = _rule_text(repeat)
    start, frame = _frame(text, anchor, zone)
    return _rule(text, start, frame, zone), frame


def _probe(text: str, anchor: datetime, zone: ZoneInfo) -> tuple[Iterator[datetime], ZoneInfo]:
    """The rule without its end (COUNT, UNTIL), walked from as many whole calendar cycles
    later as leave one or two before year 9999. dateutil walks a rule that never happens to
    the end of the calendar: seconds of CPU from today (BYMONTHDAY=30;BYMONTH=2), a fraction
    from there; and a rule with no time in a whole cycle has none at all. Its times are
    those of one cycle."""
    endless = ";".join(p for p in text.split(";") if p.split("=")[0].strip().upper() not in _ENDS)
    start, frame = _frame(text, anchor, zone)
    cycles = (MAXYEAR - CYCLE - start.year) // CYCLE
    if cycles > 0:
        start = start.replace(year=start.year + CYCLE * cycles)
    end = start.replace(year=start.year + CYCLE) if start.year + CYCLE < MAXYEAR else None
    times = _rule(endless, start, frame, zone)
    return takewhile(lambda t: end is None or t < end, times), frame


def check_repeat(repeat: str, anchor: datetime, zone: ZoneInfo, min_interval: float) -> str:
    """The rule as kept (without "RRULE:"), or BadSchedule: it does not parse, never
    happens, or repeats more often than every `min_interval` seconds."""
    try:
        text = _rule_text(repeat)
        _walked(text, anchor, zone)  # the rule as given reads
        probe, frame = _probe(text, anchor, zone)
        count = _COUNT.search(text)
        checked = min(CHECKED_TIMES, int(count.group(1))) if count else CHECKED_TIMES
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise BadSchedule(
            f"the repeat rule {repeat!r} does not parse ({exc}): give an iCalendar RRULE "
            "such as FREQ=DAILY or FREQ=WEEKLY;BYDAY=MO,TH"
        ) from None
    # Never the calendar's last year: a time in it may have no UTC equivalent.
    walked = takewhile(lambda t: t.year < MAXYEAR, probe)
    # In UTC order, each instant once: two wall-clock times a spring change's gap moves onto
    # one instant (02:00 and 03:00) fire once (`next_time`), and are not 0 seconds apart.
    times = sorted({local_to_utc(t, frame, strict=False) for t in islice(walked, checked)})
    if not times:
        raise BadSchedule(f"the repeat rule {repeat!r} never happens")
    gaps = [b - a for a, b in pairwise(times)]
    shortest = min(gaps, default=timedelta(seconds=min_interval))
    if shortest < timedelta(seconds=min_interval):
        raise BadSchedule(
            f"the repeat rule {repeat!r} runs every {_span(shortest)} at times; tasks may "
            f"repeat at most once every {_span(timedelta(seconds=min_interval))}"
        )
    return text


def next_time(repeat: str, anchor: datetime, zone: ZoneInfo, after: datetime) -> datetime | None:
    """The rule's first time strictly after `after` (UTC), or None when it has ended."""
    walked, frame = _walked(repeat, anchor, zone)
    # Found on the frame's wall clock from a little before `after`: the gap of a
    # daylight-saving change may move a local time past it.
    local_after = after.astimezone(frame).replace(tzinfo=None) - timedelta(hours=3)
    found = walked.after(local_after)
    while found is not None:
        utc = local_to_utc(found, frame, strict=False)
        if utc > after:
            return utc
        found = walked.after(found)
    return None


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"
