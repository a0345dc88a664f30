"""Time, behind a small seam so tests can move it instead of waiting.

The engine reads wall time from a clock. :class:`ManualClock` only moves when told, which
is how ``create_test_unit(...).advance("2d")`` makes a two-day sleep take milliseconds.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch (UTC)."""
        ...

    @property
    def manual(self) -> bool:
        """True when time only moves when told (no in-process timers are armed)."""
        ...


class SystemClock:
    manual = False

    def time(self) -> float:
        return time.time()


class ManualClock:
    manual = True

    def __init__(self, start: datetime | float | None = None) -> None:
        if start is None:
            self._now = time.time()
        elif isinstance(start, datetime):
            self._now = start.timestamp()
        else:
            self._now = float(start)

    def time(self) -> float:
        return self._now

    def advance(self, delta: timedelta) -> None:
        self._now += delta.total_seconds()


def floor_datetime(epoch: float) -> datetime:
    """``epoch`` as a date of whole microseconds, never later than ``epoch``.

    A stored date holds whole microseconds, and its timestamp is what a sweep compares with the
    clock: rounded up by a fraction of a microsecond, a deadline of exactly one day would not be
    due after one day on the clock (``math.floor(t * 1e6)`` alone can round up, as ``t * 1e6`` is
    itself rounded).
    """
    micros = math.floor(epoch * 1e6)
    while micros / 1e6 > epoch:
        micros -= 1
    return datetime.fromtimestamp(micros / 1e6, UTC)


def to_datetime(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


def to_epoch(moment: datetime) -> float:
    if moment.tzinfo is None:
        raise ValueError(f"{moment!r} has no time zone: pass an aware datetime, e.g. datetime.now(UTC)")
    return moment.timestamp()
