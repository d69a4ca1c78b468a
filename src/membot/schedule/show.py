"""Tasks' times as people read them: a chat's zone, a time on its wall clock, now there, and
a repeat rule named plainly where it is simple. Used by the task tools (core/tools/tasks.py),
/tasks and /timezone (bot/handlers/tasks.py) and whatever else tells a chat a task's time."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

from membot.schedule.rules import BadSchedule, zone_named

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# Rules said in a word (`simple_repeat`): one FREQ, every time.
SIMPLE = frozenset({"HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY"})
_SIMPLE_RULE = re.compile(r"(?:RRULE:)?FREQ=([A-Z]+)(?:;INTERVAL=1)?", re.IGNORECASE)


def chat_zone(own: str | None, default: str) -> ZoneInfo:
    """The chat's zone: its own (ConversationState.timezone) while the name still reads (the
    system's time zone data may drop one), else `default` (TIMEZONE), else UTC."""
    for name in (own, default):
        if name:
            try:
                return zone_named(name)
            except BadSchedule:
                continue
    return ZoneInfo("UTC")


def offset(at: datetime, zone: ZoneInfo) -> str:
    """The zone's offset from UTC at `at`: "UTC+01:00", "UTC-03:30", "UTC"."""
    delta = at.astimezone(zone).utcoffset()
    minutes = int(delta.total_seconds() // 60) if delta is not None else 0
    if not minutes:
        return "UTC"
    sign = "+" if minutes > 0 else "-"
    hours, rest = divmod(abs(minutes), 60)
    return f"UTC{sign}{hours:02d}:{rest:02d}"


def local_time(at: datetime, zone: ZoneInfo) -> str:
    """`at` on the zone's wall clock, with the zone: "2026-03-14 09:00 (Europe/Berlin)"."""
    return f"{at.astimezone(zone):%Y-%m-%d %H:%M} ({zone.key})"


def local_iso(at: datetime, zone: ZoneInfo) -> str:
    """`at` in the zone as ISO 8601 with its offset: "2026-03-14T09:00:00+01:00"."""
    return at.astimezone(zone).isoformat(timespec="seconds")


def now_line(now: datetime, zone: ZoneInfo) -> str:
    """The date, weekday, time and zone of `now` in the chat, for the model:
    "Saturday, 2026-03-14 09:00 (Europe/Berlin, UTC+01:00)", "... (UTC)"."""
    local, utc = now.astimezone(zone), offset(now, zone)
    where = zone.key if zone.key == utc else f"{zone.key}, {utc}"
    return f"{WEEKDAYS[local.weekday()]}, {local:%Y-%m-%d %H:%M} ({where})"


def simple_repeat(rule: str | None) -> str | None:
    """The FREQ of a rule that is only "every hour/day/week/month/year" (FREQ=DAILY, maybe
    with INTERVAL=1): "DAILY"; None for no rule and for any other."""
    if not rule:
        return None
    match = _SIMPLE_RULE.fullmatch(rule.strip())
    if match is None or match.group(1).upper() not in SIMPLE:
        return None
    return match.group(1).upper()
