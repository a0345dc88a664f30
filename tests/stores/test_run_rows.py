"""A run record split into columns and one JSON document (SQL, Redis, DynamoDB stores) reads back
as it was saved, whether the columns come as Python's own types or as a driver's."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from agent_unit._limits import Limits
from agent_unit._records import Answer, Interrupt, RetryMark, RunError, RunRecord, RunStatus
from agent_unit.stores.rows import run_from_row, run_row


def rich() -> RunRecord:
    moment = datetime(2026, 12, 2, 12, 0, 0, 123456, tzinfo=UTC)
    schema = {"type": "boolean"}
    interrupt = Interrupt(name="approve", key="interrupt:approve#0", payload={"x": 1}, answer_schema=schema)
    interrupt.expires_at = moment
    return RunRecord(
        id="run_01kbf9a2c0x2y3z4w5v6u7t8s9",
        agent="refund \"quoted\" é",
        thread_id="thread/é\\n",
        status=RunStatus.interrupted,
        input={"big": 10**30, "f": 0.1, "text": "naïve ☕", "list": [1, None, True], "nested": {"a": {"b": []}}},
        output=[1.5e300, -0.0],
        error=RunError(type="ValueError", message="bad", step="s", key="step:s#0"),
        interrupt=interrupt,
        wake_at=moment,
        usage=[{"input_tokens": 3, "model": "m"}],
        attempt=2,
        answers=[Answer(interrupt="approve", key="interrupt:approve#0", by="ana", at=moment)],
        retry=RetryMark(key="step:s#0", at=moment),
        limits=Limits(total_tokens=5000),
        settling=["s"],
        created_at=moment,
        updated_at=moment,
        finished_at=moment,
        version=7,
        lease_owner="host:1:2:3:x/abc",
        lease_expires=1764676800.125,
        due_at=1764676801.5,
        trace={"traceparent": "00-abc-def-01"},
    )  # fmt: skip


@pytest.mark.parametrize("owner", ["host:1:2:3:x/abc", None])
def test_a_record_reads_back_from_its_row_as_it_was_saved(owner: str | None) -> None:
    record = rich()
    record.lease_owner = owner
    record.lease_expires = None if owner is None else record.lease_expires
    assert run_from_row(run_row(record)) == record


def test_columns_in_a_drivers_own_types_read_back_the_same() -> None:
    record = rich()
    row = list(run_row(record))
    row[6], row[7] = Decimal("1764676800.125"), Decimal("1764676801.5")  # DynamoDB's numbers
    assert run_from_row(tuple(row)) == record
