from datetime import timedelta

import pytest

from agent_unit._durations import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10m", 600), ("2d", 172800), ("1h30m", 5400), ("250ms", 0.25), ("1w", 604800), ("45s", 45), (" 3 h ", 10800)],
)
def test_strings(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


def test_numbers_and_timedeltas() -> None:
    assert parse_duration(90) == timedelta(seconds=90)
    assert parse_duration(timedelta(hours=1)) == timedelta(hours=1)


@pytest.mark.parametrize("bad", ["2 fortnights", "", "10", "m", "1y", "-5m", True, None, "10m and more"])
def test_bad_durations_name_what_is_accepted(bad: object) -> None:
    with pytest.raises(ValueError, match=r"invalid duration|must not be negative"):
        parse_duration(bad)  # type: ignore[arg-type]


def test_negative_timedelta() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        parse_duration(timedelta(seconds=-1))
