"""A task's times (schedule/rules.py): `when` read in the chat's zone, RRULEs checked against
the shortest interval, and the next time: on the zone's wall clock for rules of a day or
longer, in elapsed time for shorter ones. Every refusal is a BadSchedule the model can read."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from membot.schedule.rules import BadSchedule, check_repeat, next_time, parse_when, zone_named

BERLIN = zone_named("Europe/Berlin")
TOKYO = zone_named("Asia/Tokyo")
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MIN = 900.0


def local(utc: datetime, zone: str) -> datetime:
    return utc.astimezone(zone_named(zone)).replace(tzinfo=None)


def test_a_daily_task_stays_at_nine_local_across_both_changes_of_2026() -> None:
    due, anchor = parse_when("2026-03-27T09:00", BERLIN, NOW)
    assert due == datetime(2026, 3, 27, 8, 0, tzinfo=UTC)  # CET, +01:00
    rule = check_repeat("FREQ=DAILY", anchor, BERLIN, MIN)
    times = [due]
    while times[-1] < datetime(2026, 10, 28, tzinfo=UTC):
        found = next_time(rule, anchor, BERLIN, times[-1])
        assert found is not None
        times.append(found)
    assert {local(t, "Europe/Berlin").time().isoformat() for t in times} == {"09:00:00"}
    by_day = {local(t, "Europe/Berlin").date().isoformat(): t for t in times}
    # The clocks go forward on 29 March, back on 25 October: 9:00 is 08:00 or 07:00 UTC.
    assert by_day["2026-03-28"] == datetime(2026, 3, 28, 8, 0, tzinfo=UTC)
    assert by_day["2026-03-29"] == datetime(2026, 3, 29, 7, 0, tzinfo=UTC)
    assert by_day["2026-10-24"] == datetime(2026, 10, 24, 7, 0, tzinfo=UTC)
    assert by_day["2026-10-25"] == datetime(2026, 10, 25, 8, 0, tzinfo=UTC)
    assert len(by_day) == len(times)  # one a day, none skipped or doubled


def test_a_naive_when_in_tokyo_is_the_right_instant() -> None:
    due, anchor = parse_when("2026-03-14T09:00", TOKYO, NOW)
    assert due == datetime(2026, 3, 14, 0, 0, tzinfo=UTC)  # +09:00, no daylight saving
    assert anchor == datetime(2026, 3, 14, 9, 0)
    # With an offset or Z it is absolute, and its anchor is that time on Tokyo's clock.
    due, anchor = parse_when("2026-03-14T09:00Z", TOKYO, NOW)
    assert (due, anchor) == (datetime(2026, 3, 14, 9, 0, tzinfo=UTC), datetime(2026, 3, 14, 18))
    due, _ = parse_when("2026-03-14T09:00+02:00", TOKYO, NOW)
    assert due == datetime(2026, 3, 14, 7, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("when", "says"),
    [
        ("2026-03-29T02:30", "does not exist in Europe/Berlin"),  # the clocks skip it
        ("2026-02-30T09:00", "is not an ISO 8601 date-time"),
        ("2026-02-28T09:00", "is in the past"),
        ("2026-03-14", "has no time of day"),
        ("tomorrow at nine", "is not an ISO 8601 date-time"),
        ("", "is not an ISO 8601 date-time"),
    ],
)
def test_a_when_that_cannot_be_scheduled_says_why(when: str, says: str) -> None:
    with pytest.raises(BadSchedule, match=says):
        parse_when(when, BERLIN, NOW)


def test_the_hour_the_clocks_go_back_is_its_first_time() -> None:
    # 02:30 on 25 October 2026 happens twice in Berlin: the first (still summer time) is taken.
    due, _ = parse_when("2026-10-25T02:30", BERLIN, NOW)
    assert due == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)


def test_now_itself_is_past_and_a_moment_later_is_not() -> None:
    with pytest.raises(BadSchedule, match="in the past"):
        parse_when("2026-03-01T12:00Z", BERLIN, NOW)
    due, _ = parse_when("2026-03-01T12:00:01Z", BERLIN, NOW)
    assert due == NOW + timedelta(seconds=1)


ANCHOR = datetime(2026, 3, 2, 9, 0)


@pytest.mark.parametrize(
    ("repeat", "says"),
    [
        ("FREQ=FORTNIGHTLY", "does not parse"),
        ("every day", "does not parse"),
        ("FREQ=DAILY;BYDAY=XX", "does not parse"),
        ("DTSTART:20260101T000000\nRRULE:FREQ=DAILY", "does not parse"),
        ("FREQ=MINUTELY", "runs every 1 minute at times; tasks may repeat at most once every 15"),
        ("FREQ=HOURLY;BYMINUTE=0,5", "runs every 5 minutes at times"),
        ("FREQ=SECONDLY;INTERVAL=899", "runs every 899 seconds"),
        ("FREQ=DAILY;COUNT=0", "never happens"),
    ],
)
def test_a_repeat_that_cannot_be_scheduled_says_why(repeat: str, says: str) -> None:
    with pytest.raises(BadSchedule, match=says):
        check_repeat(repeat, ANCHOR, BERLIN, MIN)


@pytest.mark.parametrize(
    "repeat",
    [
        "FREQ=SECONDLY;INTERVAL=900",
        "FREQ=MINUTELY;INTERVAL=15",
        "FREQ=HOURLY;INTERVAL=2",
        "FREQ=WEEKLY;BYDAY=MO,TH",
        "FREQ=MONTHLY;BYMONTHDAY=1",
        "FREQ=YEARLY",
        "FREQ=DAILY;COUNT=1",  # once only: nothing to be too close to
    ],
)
def test_rules_at_least_the_minimum_apart_are_kept(repeat: str) -> None:
    assert check_repeat(repeat, ANCHOR, BERLIN, MIN) == repeat
    assert check_repeat(f"RRULE:{repeat}", ANCHOR, BERLIN, MIN) == repeat


def test_count_ends_a_rule() -> None:
    due, anchor = parse_when("2026-03-02T09:00", BERLIN, NOW)
    rule = check_repeat("FREQ=DAILY;COUNT=3", anchor, BERLIN, MIN)
    second = next_time(rule, anchor, BERLIN, due)
    assert second == datetime(2026, 3, 3, 8, 0, tzinfo=UTC)
    third = next_time(rule, anchor, BERLIN, second)
    assert third == datetime(2026, 3, 4, 8, 0, tzinfo=UTC)
    assert next_time(rule, anchor, BERLIN, third) is None


def test_until_in_utc_ends_a_rule_at_that_instant() -> None:
    due, anchor = parse_when("2026-03-02T09:00", BERLIN, NOW)
    # 08:00Z on 4 March is 09:00 in Berlin: that day's time is the last one.
    rule = check_repeat("FREQ=DAILY;UNTIL=20260304T080000Z", anchor, BERLIN, MIN)
    assert next_time(rule, anchor, BERLIN, due) == datetime(2026, 3, 3, 8, 0, tzinfo=UTC)
    last = next_time(rule, anchor, BERLIN, datetime(2026, 3, 3, 8, 0, tzinfo=UTC))
    assert last == datetime(2026, 3, 4, 8, 0, tzinfo=UTC)
    assert next_time(rule, anchor, BERLIN, last) is None
    # One second earlier and the 4th is past it.
    rule = check_repeat("FREQ=DAILY;UNTIL=20260304T075959Z", anchor, BERLIN, MIN)
    assert next_time(rule, anchor, BERLIN, datetime(2026, 3, 3, 8, 0, tzinfo=UTC)) is None


def test_an_until_without_z_is_on_the_chats_clock_for_hourly_rules_too() -> None:
    due, anchor = parse_when("2026-03-02T09:00", BERLIN, NOW)
    rule = check_repeat("FREQ=HOURLY;UNTIL=20260302T120000", anchor, BERLIN, MIN)
    times = [due]
    while (found := next_time(rule, anchor, BERLIN, times[-1])) is not None:
        times.append(found)
    # 09:00 to 12:00 in Berlin: four times, the last at 11:00 UTC.
    assert [local(t, "Europe/Berlin").hour for t in times] == [9, 10, 11, 12]
    daily = check_repeat("FREQ=DAILY;UNTIL=20260303T090000", anchor, BERLIN, MIN)
    last = next_time(daily, anchor, BERLIN, due)
    assert last == datetime(2026, 3, 3, 8, 0, tzinfo=UTC)
    assert next_time(daily, anchor, BERLIN, last) is None


@pytest.mark.parametrize(
    "repeat",
    [
        "FREQ=SECONDLY;INTERVAL=900;BYMONTH=2;BYMONTHDAY=30",
        "FREQ=DAILY;BYMONTH=4;BYMONTHDAY=31",
        "FREQ=DAILY;INTERVAL=7;BYDAY=TU",  # from a Monday: always a Monday
    ],
)
def test_a_rule_that_never_happens_is_refused_without_walking_to_year_9999(repeat: str) -> None:
    # dateutil looks for a first time to the end of the calendar: 9 s of CPU for the first.
    started = time.process_time()
    with pytest.raises(BadSchedule, match="never happens"):
        check_repeat(repeat, ANCHOR, BERLIN, MIN)
    assert time.process_time() - started < 3.0


def test_a_rare_rule_is_kept_and_comes_when_it_should() -> None:
    due, anchor = parse_when("2026-03-02T09:00", BERLIN, NOW)
    rule = check_repeat("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", anchor, BERLIN, MIN)
    assert next_time(rule, anchor, BERLIN, due) == datetime(2028, 2, 29, 8, 0, tzinfo=UTC)


def test_every_two_hours_is_two_hours_of_elapsed_time_across_a_change() -> None:
    due, anchor = parse_when("2026-03-28T23:00", BERLIN, datetime(2026, 3, 28, tzinfo=UTC))
    rule = check_repeat("FREQ=HOURLY;INTERVAL=2", anchor, BERLIN, MIN)
    times = [due]
    for _ in range(6):
        found = next_time(rule, anchor, BERLIN, times[-1])
        assert found is not None
        times.append(found)
    assert {b - a for a, b in pairwise(times)} == {timedelta(hours=2)}
    # The local clock shows the jump: 23:00, 01:00, 04:00 (02:00 to 03:00 does not exist).
    shown = [local(t, "Europe/Berlin").strftime("%H:%M") for t in times[:4]]
    assert shown == ["23:00", "01:00", "04:00", "06:00"]


def test_a_daily_task_missed_for_a_week_comes_next_tomorrow_once() -> None:
    _, anchor = parse_when("2026-03-02T09:00", BERLIN, NOW)
    rule = check_repeat("FREQ=DAILY", anchor, BERLIN, MIN)
    back = datetime(2026, 3, 9, 10, 30, tzinfo=UTC)  # a week later, after that day's 9:00
    assert next_time(rule, anchor, BERLIN, back) == datetime(2026, 3, 10, 8, 0, tzinfo=UTC)


def test_a_weekly_rule_falls_on_its_days() -> None:
    due, anchor = parse_when("2026-03-02T18:30", BERLIN, NOW)  # a Monday
    rule = check_repeat("FREQ=WEEKLY;BYDAY=MO,TH", anchor, BERLIN, MIN)
    found = next_time(rule, anchor, BERLIN, due)
    assert found is not None and local(found, "Europe/Berlin") == datetime(2026, 3, 5, 18, 30)
    found = next_time(rule, anchor, BERLIN, found)
    assert found is not None and local(found, "Europe/Berlin") == datetime(2026, 3, 9, 18, 30)


def test_a_daily_time_the_spring_change_skips_is_moved_past_the_gap() -> None:
    _, anchor = parse_when("2026-03-27T02:30", BERLIN, NOW)
    rule = check_repeat("FREQ=DAILY", anchor, BERLIN, MIN)
    after = datetime(2026, 3, 28, 2, 0, tzinfo=UTC)  # after the 28th's 02:30 (01:30Z)
    found = next_time(rule, anchor, BERLIN, after)
    # 02:30 on the 29th does not exist: read with the offset before the change, 03:30 local.
    assert found == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    again = next_time(rule, anchor, BERLIN, found)
    assert again == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)  # 02:30 CEST


def test_zones_are_iana_names_only() -> None:
    assert zone_named(" Asia/Tokyo ").key == "Asia/Tokyo"
    for bad in ("Mars/Base", "", "../etc/passwd", "/etc/localtime", "Europe/../UTC"):
        with pytest.raises(BadSchedule, match="unknown time zone"):
            zone_named(bad)


def test_the_hours_an_hourly_rule_names_are_the_chats_hours() -> None:
    # "At 9, 13 and 17" in Berlin: BYHOUR is read on the chat's clock, as a daily rule's is
    # (walked on UTC, it fired at 11, 15 and 19 in summer, and first at 11, not at 9).
    due, anchor = parse_when("2026-06-01T09:00", BERLIN, NOW)
    rule = check_repeat("FREQ=HOURLY;BYHOUR=9,13,17", anchor, BERLIN, MIN)
    first = next_time(rule, anchor, BERLIN, due - timedelta(milliseconds=1))
    assert first == due
    times = [due]
    for _ in range(4):
        found = next_time(rule, anchor, BERLIN, times[-1])
        assert found is not None
        times.append(found)
    shown = [local(t, "Europe/Berlin").strftime("%d %H:%M") for t in times]
    assert shown == ["01 09:00", "01 13:00", "01 17:00", "02 09:00", "02 13:00"]
    # Every 15 minutes on weekdays: a weekday in Berlin, not in UTC (Monday 00:30 Berlin is
    # Sunday in UTC).
    _, monday = parse_when("2026-06-01T00:30", BERLIN, NOW)
    rule = check_repeat("FREQ=MINUTELY;INTERVAL=15;BYDAY=MO,TU,WE,TH,FR", monday, BERLIN, MIN)
    sunday_late = datetime(2026, 5, 31, 22, 0, tzinfo=UTC)  # 00:00 on Monday in Berlin
    found = next_time(rule, monday, BERLIN, sunday_late)
    assert found is not None and local(found, "Europe/Berlin") == datetime(2026, 6, 1, 0, 30)


def test_a_rule_whose_times_the_spring_change_folds_into_one_is_kept() -> None:
    # At 1, 2 and 3 at night: on the night the clocks skip 2:00, that time is 3:00, once.
    _, anchor = parse_when("2026-03-20T01:00", BERLIN, NOW)
    rule = check_repeat("FREQ=DAILY;BYHOUR=1,2,3", anchor, BERLIN, MIN)
    after = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)  # 00:00 on the 29th in Berlin
    times = [after]
    for _ in range(3):
        found = next_time(rule, anchor, BERLIN, times[-1])
        assert found is not None
        times.append(found)
    shown = [local(t, "Europe/Berlin").strftime("%d %H:%M") for t in times[1:]]
    assert shown == ["29 01:00", "29 03:00", "30 01:00"]
