"""Durations as people write them: ``"10m"``, ``"2d"``, ``"1h30m"``, ``"250ms"``.

Configuration (``budget``, ``retention``) and ``run.sleep`` accept a string, a number of
seconds or a :class:`~datetime.timedelta`; everything inside works in ``timedelta``.
"""

from __future__ import annotations

import re
from datetime import timedelta

__all__ = ["Duration", "parse_duration"]

Duration = str | int | float | timedelta

_UNITS: dict[str, float] = {
    "ms": 0.001,
    "s": 1,
    "m": 60,
    "h": 3600,
    "d": 86400,
    "w": 604800,
}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_WHOLE = re.compile(r"^\s*(?:\d+(?:\.\d+)?\s*(?:ms|s|m|h|d|w)\s*)+$")


def parse_duration(value: Duration) -> timedelta:
    """Return ``value`` as a ``timedelta``; raise ``ValueError`` naming what is accepted."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}: use a string like '10m', seconds or a timedelta")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and _WHOLE.match(value.lower()):
        seconds = sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(value.lower()))
    else:
        raise ValueError(
            f"invalid duration {value!r}: write a number and a unit (ms, s, m, h, d, w), "
            "for example '250ms', '10m', '2d' or '1h30m'"
        )
    if seconds < 0:
        raise ValueError(f"invalid duration {value!r}: it must not be negative")
    return timedelta(seconds=seconds)
