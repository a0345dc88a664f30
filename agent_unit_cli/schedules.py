"""A portable schedule, written for each host's scheduler. Pure functions: no I/O.

The input is what ``[tasks.NAME] schedule`` accepts (:func:`agent_unit._tasks.check_schedule`):
five numeric fields with standard cron meaning, 0 and 7 are Sunday, UTC, and at most one of
day-of-month and day-of-week restricted. The hosts differ in three ways, handled here:

- weekday numbers: standard cron counts Sunday as 0 (or 7), AWS and Cloudflare as 1, Vercel
  reads 0-6. Weekdays are written as names where the host takes them (AWS, Cloudflare), so no
  number is ever read in the wrong system, and as 0-6 for Vercel, which takes no names;
- AWS wants six fields (a year) and ``?`` in the day field it does not use;
- AWS documents steps only as ``start/step``: ``*/15`` is written ``0/15``, and a range with a
  step is written as its list of values.
"""

from __future__ import annotations

from collections.abc import Callable

from agent_unit._tasks import check_schedule

__all__ = ["aws_eventbridge", "cloudflare", "vercel"]

DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_LOW = {"minute": 0, "hour": 0, "day-of-month": 1, "month": 1}
_HIGH = {"minute": 59, "hour": 23, "day-of-month": 31, "month": 12}


def aws_eventbridge(schedule: str) -> str:
    """``cron(min hour dom month dow year)`` for EventBridge (Scheduler and rules)."""
    minute, hour, dom, month, dow = check_schedule(schedule).split()
    fields = [_aws_field("minute", minute), _aws_field("hour", hour)]
    if dow == "*":
        fields += [_aws_field("day-of-month", dom), _aws_field("month", month), "?"]
    else:
        fields += ["?", _aws_field("month", month), _weekday_names(dow)]
    return f"cron({' '.join([*fields, '*'])})"


def vercel(schedule: str) -> str:
    """The five fields for ``crons[].schedule``: weekdays as 0-6 (Sunday 0), no names."""
    minute, hour, dom, month, dow = check_schedule(schedule).split()
    return " ".join([minute, hour, dom, month, "*" if dow == "*" else _runs(weekdays(dow), str)])


def cloudflare(schedule: str) -> str:
    """The five fields for ``triggers.crons``: weekdays as names (Cloudflare numbers Sunday 1)."""
    minute, hour, dom, month, dow = check_schedule(schedule).split()
    return " ".join([minute, hour, dom, month, "*" if dow == "*" else _weekday_names(dow)])


def weekdays(field: str) -> list[int]:
    """The days a standard day-of-week field names, 0 (Sunday) to 6, sorted; 7 is Sunday."""
    days: set[int] = set()
    for item in field.split(","):
        span, _, step = item.partition("/")
        if span == "*":
            low, high = 0, 7
        else:
            first, _, last = span.partition("-")
            low = int(first)
            high = int(last) if last else (7 if step else low)
        days.update(day % 7 for day in range(low, high + 1, int(step or 1)))
    return sorted(days)


def _weekday_names(field: str) -> str:
    return _runs(weekdays(field), lambda day: DAYS[day])


def _runs(days: list[int], render: Callable[[int], str]) -> str:
    """``[1, 2, 3, 4, 5]`` as ``MON-FRI`` (with ``render`` naming each day); runs as ranges."""
    parts: list[str] = []
    start = previous = days[0]
    for day in [*days[1:], None]:
        if day is not None and day == previous + 1:
            previous = day
            continue
        parts.append(render(start) if start == previous else f"{render(start)}-{render(previous)}")
        if day is not None:
            start = previous = day
    return ",".join(parts)


def _aws_field(name: str, field: str) -> str:
    items = []
    for item in field.split(","):
        span, _, step = item.partition("/")
        if not step:
            items.append(item)
        elif span == "*":
            items.append(f"{_LOW[name]}/{step}")
        else:
            first, _, last = span.partition("-")
            high = int(last) if last else _HIGH[name]
            items.extend(str(value) for value in range(int(first), high + 1, int(step)))
    return ",".join(items)
