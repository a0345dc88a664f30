"""Portable schedules, converted for each host and checked against examples from its own docs."""

from __future__ import annotations

import pytest

from agent_unit.errors import TaskError
from agent_unit_cli.schedules import aws_eventbridge, cloudflare, vercel, weekdays

# Amazon EventBridge, "Cron expressions reference" (the EventBridge Scheduler user guide has the
# same table): each example's meaning, written as standard cron, and AWS's own expression.
AWS_DOCS = [
    ("0 10 * * *", "cron(0 10 * * ? *)"),  # 10:00 am (UTC) every day
    ("15 12 * * *", "cron(15 12 * * ? *)"),  # 12:15 pm (UTC) every day
    ("0 18 * * 1-5", "cron(0 18 ? * MON-FRI *)"),  # 6:00 pm Monday through Friday
    ("0 8 1 * *", "cron(0 8 1 * ? *)"),  # 8:00 am every first day of the month
    ("*/15 * * * *", "cron(0/15 * * * ? *)"),  # every 15 minutes
    ("*/10 * * * 1-5", "cron(0/10 * ? * MON-FRI *)"),  # every 10 minutes Monday through Friday
    ("*/5 8-17 * * 1-5", "cron(0/5 8-17 ? * MON-FRI *)"),  # every 5 minutes, 8:00 am to 5:55 pm, weekdays
]

# Cloudflare Workers, "Cron Triggers" (Supported cron expressions, Examples): weekdays are
# 1 (Sunday) to 7, or case-insensitive names; names are what is written.
CLOUDFLARE_DOCS = [
    ("* * * * *", "* * * * *"),  # at every minute
    ("*/30 * * * *", "*/30 * * * *"),  # at every 30th minute
    ("45 * * * *", "45 * * * *"),  # on the 45th minute of every hour
    ("0 17 * * 0", "0 17 * * SUN"),  # 17:00 (UTC) on Sunday: `0 17 * * sun` or `0 17 * * 1`
    ("0 17 * * 7", "0 17 * * SUN"),
    ("10 7 * * 1-5", "10 7 * * MON-FRI"),  # 07:10 (UTC) on weekdays: `10 7 * * mon-fri` or `2-6`
    ("0 15 1 * *", "0 15 1 * *"),  # 15:00 (UTC) on first day of the month
    ("*/3 * * * *", "*/3 * * * *"),  # at every 3rd minute (the configuration example)
]

# Vercel, "Cron Jobs" (Cron expressions) and Vercel's own cron-jobs guide: five numeric fields,
# no names (MON, JAN...), day-of-week 0-6 with Sunday 0.
VERCEL_DOCS = [
    ("0 8 * * *", "0 8 * * *"),  # daily at 8:00 UTC
    ("0 5 * * *", "0 5 * * *"),  # every day at 5:00 am
    ("*/5 * * * *", "*/5 * * * *"),  # every five minutes
    ("0 * * * *", "0 * * * *"),  # every hour
    ("0 9 * * 1-5", "0 9 * * 1-5"),  # weekdays only
    ("0 9 * * 7", "0 9 * * 0"),  # Sunday, written as Vercel reads it
    ("0 9 * * 5-7", "0 9 * * 0,5-6"),
]


@pytest.mark.parametrize(("standard", "expected"), AWS_DOCS)
def test_aws_gets_six_fields_a_question_mark_in_the_unused_day_and_weekday_names(standard: str, expected: str) -> None:
    assert aws_eventbridge(standard) == expected


@pytest.mark.parametrize(("standard", "expected"), CLOUDFLARE_DOCS)
def test_cloudflare_gets_weekday_names_so_its_sunday_is_1_numbering_never_matters(standard: str, expected: str) -> None:
    assert cloudflare(standard) == expected


@pytest.mark.parametrize(("standard", "expected"), VERCEL_DOCS)
def test_vercel_gets_numeric_fields_with_sunday_as_0(standard: str, expected: str) -> None:
    assert vercel(standard) == expected


def test_aws_writes_a_range_with_a_step_as_its_values_and_sunday_7_as_sun() -> None:
    assert aws_eventbridge("0-30/10 1-10/3 * * *") == "cron(0,10,20,30 1,4,7,10 * * ? *)"
    assert aws_eventbridge("0 8 * * 7") == "cron(0 8 ? * SUN *)"
    assert aws_eventbridge("0 8 * * 0,6") == "cron(0 8 ? * SUN,SAT *)"
    assert aws_eventbridge("0 8 * 1-6/2 *") == "cron(0 8 * 1,3,5 ? *)"


def test_weekday_fields_expand_as_standard_cron_reads_them() -> None:
    assert weekdays("*/2") == [0, 2, 4, 6]
    assert weekdays("1-7/2") == [0, 1, 3, 5]  # 7 is Sunday
    assert weekdays("5-7") == [0, 5, 6]


@pytest.mark.parametrize("convert", [aws_eventbridge, vercel, cloudflare])
@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("0 8 1 * 1", "restricts both day-of-month (1) and day-of-week (1)"),
        ("0 8 * * MON", "the day-of-week field 'MON' is not portable"),
        ("0 8 L * *", "the day-of-month field 'L' is not portable"),
        ("5/10 * * * *", "the minute field '5/10' is not portable"),
        ("0 8 * *", "use five numeric fields"),
        ("0 24 * * *", "bad hour value"),
    ],
)
def test_a_schedule_no_host_can_read_alike_is_refused_with_what_to_write(
    convert: object, schedule: str, message: str
) -> None:
    with pytest.raises(TaskError, match=message.replace("(", r"\(").replace(")", r"\)")):
        convert(schedule)  # type: ignore[operator]
