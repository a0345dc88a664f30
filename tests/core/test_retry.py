"""``run.step(name, fn, retry=RetryPolicy(...))``: attempts within one execution, one journal entry."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_unit import RetryPolicy, Run, RunStatus, StepContext, define_agent
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import create_test_unit

NOW = RetryPolicy(attempts=3, initial=0)  # no wait between attempts: the tests never sleep


class Flaky(Exception):
    pass


async def test_a_step_that_fails_twice_then_succeeds_keeps_one_key_and_is_journaled_once(sqlite_path: Path) -> None:
    keys: list[str] = []

    def charge(step: StepContext) -> str:
        keys.append(step.idempotency_key)
        if len(keys) < 3:
            raise Flaky(f"attempt {len(keys)}")
        return "charged"

    @define_agent
    async def agent(input: None, run: Run) -> str:
        return await run.step("charge", charge, retry=NOW)

    unit = create_test_unit({"a": agent}, SQLiteStore(sqlite_path))
    record = await unit.run("a")
    assert record.status == RunStatus.completed and record.output == "charged"
    assert len(keys) == 3 and len(set(keys)) == 1
    journal = await unit.store.load_journal(record.id)
    assert list(journal) == ["step:charge#0"] and journal["step:charge#0"].value == '"charged"'
    events = await unit.events(record.id)
    retries = [e["value"] for e in events if e["type"] == "CUSTOM" and e["name"] == "agent-unit.step-retry"]
    assert [(r["stepName"], r["attempt"], r["error"]) for r in retries] == [
        ("charge", 1, {"type": "Flaky", "message": "attempt 1"}),
        ("charge", 2, {"type": "Flaky", "message": "attempt 2"}),
    ]
    assert [e["type"] for e in events].count("STEP_STARTED") == 1
    assert [e["type"] for e in events].count("STEP_FINISHED") == 1
    await unit.close()


async def test_exhausted_retries_fail_the_step_with_the_last_error_once() -> None:
    calls: list[int] = []

    def charge() -> str:
        calls.append(1)
        raise Flaky(f"attempt {len(calls)}")

    @define_agent
    async def agent(input: None, run: Run) -> str:
        return await run.step("charge", charge, retry=NOW)

    unit = create_test_unit({"a": agent})
    record = await unit.run("a")
    assert record.status == RunStatus.failed and record.error is not None
    assert record.error.type == "Flaky" and record.error.message == "attempt 3" and record.error.step == "charge"
    assert len(calls) == 3
    journal = await unit.store.load_journal(record.id)
    assert journal["step:charge#0"].error is not None and journal["step:charge#0"].error["message"] == "attempt 3"


async def test_exceptions_outside_retry_on_are_not_retried() -> None:
    calls: list[int] = []

    def charge() -> str:
        calls.append(1)
        raise ValueError("bad card number")

    @define_agent
    async def agent(input: None, run: Run) -> str:
        return await run.step("charge", charge, retry=RetryPolicy(attempts=5, initial=0, retry_on=(Flaky,)))

    record = await create_test_unit({"a": agent}).run("a")
    assert record.status == RunStatus.failed and record.error is not None and record.error.type == "ValueError"
    assert calls == [1]


async def test_without_a_policy_a_step_that_raises_is_not_retried() -> None:
    calls: list[int] = []

    def charge() -> str:
        calls.append(1)
        raise Flaky("once")

    @define_agent
    async def agent(input: None, run: Run) -> str:
        return await run.step("charge", charge)

    await create_test_unit({"a": agent}).run("a")
    assert calls == [1]


def test_the_backoff_grows_by_its_multiplier_up_to_its_ceiling() -> None:
    policy = RetryPolicy(attempts=6, initial="1s", multiplier=3, max_delay="20s")
    assert [policy.delay(n) for n in range(1, 6)] == [1, 3, 9, 20, 20]


@pytest.mark.parametrize(
    "options",
    [{"attempts": 0}, {"multiplier": 0.5}, {"retry_on": (KeyboardInterrupt,)}, {"initial": "soon"}],
    ids=["no attempts", "shrinking", "not an Exception", "bad duration"],
)
def test_a_policy_that_cannot_work_is_refused_where_it_is_written(options: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**options)  # type: ignore[arg-type]


@pytest.mark.timeout(60)  # without the fix the park waits out the backoff (an hour)
async def test_a_park_during_the_backoff_journals_nothing_and_the_step_runs_again_on_resume() -> None:
    keys: list[str] = []

    def charge(step: StepContext) -> str:
        keys.append(step.idempotency_key)
        if len(keys) == 1:
            raise Flaky("first attempt")
        return "charged"

    @define_agent
    async def agent(input: None, run: Run) -> str:
        charged, _ = await asyncio.gather(
            run.step("charge", charge, retry=RetryPolicy(initial="1h")),
            run.interrupt("approve"),
        )
        return charged

    unit = create_test_unit({"a": agent}, lease_ttl="2h")
    parked = await unit.run("a")
    assert parked.status == RunStatus.interrupted
    assert "step:charge#0" not in await unit.store.load_journal(parked.id)
    done = await unit.resume(parked.id, True)
    assert done.status == RunStatus.completed and done.output == "charged"
    assert len(keys) == 2 and len(set(keys)) == 1  # the same key on the attempt after the resume


@pytest.mark.timeout(60)
async def test_a_cancel_during_the_backoff_stops_the_step_at_once() -> None:
    failed = asyncio.Event()
    calls: list[int] = []

    async def charge() -> str:
        calls.append(1)
        failed.set()
        raise Flaky("first attempt")

    @define_agent
    async def agent(input: None, run: Run) -> str:
        return await run.step("charge", charge, retry=RetryPolicy(initial="1h"))

    unit = create_test_unit({"a": agent})
    started = await unit.engine.start("a", None)
    await failed.wait()
    await unit.cancel(started.id)
    record = await unit.engine.wait(started.id)
    assert record.status == RunStatus.cancelled and calls == [1]
    assert await unit.store.load_journal(started.id) == {}
