"""Times as a Telegram chat shows them: a `date_time` entity (Bot API 9.5), which each
reader's app shows in their own locale and time zone, written as the time on the chat's
clock (schedule/show.py `local_time`) for an app that shows the text as it is. For /tasks
and /timezone, and for anything else the bot says about a task's time."""

from __future__ import annotations

import string
from datetime import datetime
from zoneinfo import ZoneInfo

from aiogram.utils.formatting import DateTime, Text

from membot.bot import texts
from membot.schedule.show import local_time, simple_repeat

# Weekday, the date in long form, the time in short form ("Saturday, March 14, 2026 9:00").
DATE_TIME_FORMAT = "wDt"


def time_node(at: datetime, zone: ZoneInfo) -> DateTime:
    """`at` as a date_time entity whose text is its time in `zone`."""
    return DateTime(
        local_time(at, zone), unix_time=int(at.timestamp()), date_time_format=DATE_TIME_FORMAT
    )


def with_time(template: str, at: datetime, zone: ZoneInfo, /, **values: str) -> Text:
    """`template` (a str.format template of the bot's words) with {now} as `at`'s date_time
    entity and the other placeholders filled with `values`."""
    nodes: list[str | DateTime] = []
    for literal, field, _, _ in string.Formatter().parse(template):
        if literal:
            nodes.append(literal)
        if field == "now":
            nodes.append(time_node(at, zone))
        elif field:
            nodes.append(values[field])
    return Text(*nodes)


def repeat_words(words: texts.Texts, rule: str | None) -> str:
    """A task's repeat as people say it: "once", "every day", else its RRULE."""
    if rule is None:
        return words.TASK_ONCE
    named = {
        "HOURLY": words.REPEAT_HOURLY,
        "DAILY": words.REPEAT_DAILY,
        "WEEKLY": words.REPEAT_WEEKLY,
        "MONTHLY": words.REPEAT_MONTHLY,
        "YEARLY": words.REPEAT_YEARLY,
    }
    simple = simple_repeat(rule)
    return named[simple] if simple is not None else words.REPEAT_RULE.format(rule=rule)
