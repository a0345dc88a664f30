"""Retrying a failed run from the work that failed, on every store: the deployment after the fix
is a second engine over the same store, running the fixed agent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_unit import Run, RunStatus, define_agent
from agent_unit.errors import NonDeterminismError, NotFailed, RunConflict
from agent_unit.run import StepContext
from agent_unit.testing import create_test_unit, execute_again

from ..conftest import StoreFactory


def refund_agent(calls: list[tuple[str, Any]], *, bug: bool, extra_step_first: bool = False) -> Any:
    """An agent that loads an order, charges it and notifies; ``bug``: the charge raises."""

    @define_agent
    async def refund(input: None, run: Run) -> str:
        if extra_step_first:
            await run.step("validate", lambda: calls.append(("validate", None)))
        order = await run.step("load", lambda: calls.append(("load", None)) or {"id": "o_1", "amount": 5})

        def charge(step: StepContext) -> str:
            calls.append(("charge", (step.idempotency_key, step.attempt)))
            if bug:
                return str(order["missing"])  # the bug: a KeyError
            return f"charged {order['amount']}"

        charged = await run.step("charge", charge)
        await run.step("notify", lambda: calls.append(("notify", None)))
        return charged

    return refund


async def test_a_failed_run_retried_after_the_fix_completes_without_repeating_earlier_steps(
    store_factory: StoreFactory,
) -> None:
    calls: list[tuple[str, Any]] = []
    before = create_test_unit({"refund": refund_agent(calls, bug=True)}, store_factory())
    failed = await before.run("refund")
    assert failed.status == RunStatus.failed and failed.error is not None
    assert failed.error.step == "charge" and failed.error.key == "step:charge#0"

    fixed = create_test_unit({"refund": refund_agent(calls, bug=False)}, store_factory(), clock=before.clock)
    await fixed.engine.retry(failed.id)
    done = await fixed.engine.wait(failed.id)
    assert done.status == RunStatus.completed and done.output == "charged 5" and done.error is None
    assert [name for name, _ in calls] == ["load", "charge", "charge", "notify"]  # load ran once
    (first_key, first_attempt), (second_key, second_attempt) = [value for name, value in calls if name == "charge"]
    assert first_key == second_key and (first_attempt, second_attempt) == (1, 2)  # same key, a new attempt
    assert done.attempt == 2 and done.retry is not None and done.retry.count == 1
    events = [event["type"] for event in await fixed.events(failed.id)]
    assert events.count("RUN_ERROR") == 1 and events[-1] == "RUN_FINISHED"
    await before.close()
    await fixed.close()


async def test_a_retried_step_replays_its_new_outcome_on_every_later_execution(store_factory: StoreFactory) -> None:
    calls: list[tuple[str, Any]] = []
    before = create_test_unit({"refund": refund_agent(calls, bug=True)}, store_factory())
    failed = await before.run("refund")
    fixed = create_test_unit({"refund": refund_agent(calls, bug=False)}, store_factory(), clock=before.clock)
    await fixed.engine.retry(failed.id, wait=True)
    await execute_again(fixed, failed.id)  # a recovery after the retry replays the retried step
    again = await fixed.get(failed.id)
    assert again.status == RunStatus.completed and again.output == "charged 5"
    assert [name for name, _ in calls] == ["load", "charge", "charge", "notify"]
    await before.close()
    await fixed.close()


async def test_a_run_failed_by_agent_code_between_steps_is_retried_from_there(store_factory: StoreFactory) -> None:
    ran: list[str] = []

    def agent(bug: bool) -> Any:
        @define_agent
        async def between(input: None, run: Run) -> int:
            first = await run.step("first", lambda: ran.append("first") or 2)
            if bug:
                raise ZeroDivisionError("division by zero")
            return await run.step("second", lambda: ran.append("second") or first * 10)

        return between

    before = create_test_unit({"a": agent(True)}, store_factory())
    failed = await before.run("a")
    assert failed.status == RunStatus.failed and failed.error is not None and failed.error.key is None
    fixed = create_test_unit({"a": agent(False)}, store_factory(), clock=before.clock)
    done = await fixed.engine.retry(failed.id, wait=True)
    assert done.status == RunStatus.completed and done.output == 20 and ran == ["first", "second"]
    await before.close()
    await fixed.close()


async def test_a_retry_whose_code_no_longer_replays_the_journal_is_refused_naming_the_step(
    store_factory: StoreFactory,
) -> None:
    calls: list[tuple[str, Any]] = []
    before = create_test_unit({"refund": refund_agent(calls, bug=True)}, store_factory())
    failed = await before.run("refund")
    calls.clear()
    moved = create_test_unit(
        {"refund": refund_agent(calls, bug=False, extra_step_first=True)}, store_factory(), clock=before.clock
    )
    refused = await moved.engine.retry(failed.id, wait=True)
    assert refused.status == RunStatus.failed and refused.error is not None
    assert refused.error.type == NonDeterminismError.__name__ and "'validate'" in refused.error.message
    assert refused.error.step == "validate" and calls == []  # nothing new ran: not the step, not the charge
    # Undo the change that moved the code: the next retry goes on from the failed charge.
    fixed = create_test_unit({"refund": refund_agent(calls, bug=False)}, store_factory(), clock=before.clock)
    done = await fixed.engine.retry(failed.id, wait=True)
    assert done.status == RunStatus.completed and [name for name, _ in calls] == ["charge", "notify"]
    assert done.retry is not None and done.retry.count == 2
    for unit in (before, moved, fixed):
        await unit.close()


async def test_a_step_that_fails_again_after_a_retry_can_be_retried_again() -> None:
    calls: list[tuple[str, Any]] = []
    unit = create_test_unit({"refund": refund_agent(calls, bug=True)})
    failed = await unit.run("refund")
    again = await unit.engine.retry(failed.id, wait=True)  # no fix yet: it fails again, in the same step
    assert again.status == RunStatus.failed and again.error is not None and again.error.step == "charge"
    fixed = create_test_unit({"refund": refund_agent(calls, bug=False)}, unit.store, clock=unit.clock)
    done = await fixed.engine.retry(failed.id, wait=True)
    assert done.status == RunStatus.completed and [name for name, _ in calls] == [
        "load",
        "charge",
        "charge",
        "charge",
        "notify",
    ]
    assert done.attempt == 3
    await unit.close()
    await fixed.close()


@pytest.mark.parametrize("status", ["completed", "interrupted"])
async def test_only_a_failed_run_is_retried(status: str) -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        if status == "interrupted":
            await run.interrupt("wait")
        return "ok"

    unit = create_test_unit({"a": agent})
    record = await unit.run("a")
    with pytest.raises(NotFailed, match=f"run {record.id} is {status}, not failed"):
        await unit.engine.retry(record.id)
    assert NotFailed.status == 409
    await unit.close()


async def test_of_two_concurrent_retries_exactly_one_wins(store_factory: StoreFactory) -> None:
    calls: list[tuple[str, Any]] = []
    before = create_test_unit({"refund": refund_agent(calls, bug=True)}, store_factory())
    failed = await before.run("refund")
    # Two deployments of the fixed code, each with its own handle on the store, retry at once.
    first = create_test_unit({"refund": refund_agent(calls, bug=False)}, store_factory(), clock=before.clock)
    second = create_test_unit({"refund": refund_agent(calls, bug=False)}, store_factory(), clock=before.clock)
    outcomes = await asyncio.gather(
        first.engine.retry(failed.id), second.engine.retry(failed.id), return_exceptions=True
    )
    won = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
    lost = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    assert len(won) == 1 and len(lost) == 1 and isinstance(lost[0], RunConflict), outcomes
    for unit in (first, second):
        await unit.engine.wait(failed.id)
    done = await before.get(failed.id)
    assert done.status == RunStatus.completed and done.attempt == 2
    assert [name for name, _ in calls] == ["load", "charge", "charge", "notify"]  # the charge ran once more
    for unit in (before, first, second):
        await unit.close()


def gathering(ran: list[str], *, bug: bool) -> Any:
    """Three steps at once: ``slow`` is still running when ``charge`` fails, after ``quick`` finished."""

    @define_agent
    async def agent(input: None, run: Run) -> list[str]:
        await run.step("load", lambda: ran.append("load"))

        async def slow() -> str:
            ran.append("slow")
            await asyncio.sleep(1.0 if bug else 0)  # still running when its sibling fails
            return "slow"

        def quick() -> str:
            ran.append("quick")
            return "quick"

        def charge() -> str:
            ran.append("charge")
            if bug:
                raise KeyError("amount")
            return "charged"

        async def charge_later() -> str:
            await asyncio.sleep(0.2)  # once quick is journaled
            return await run.step("charge", charge)

        return list(await asyncio.gather(run.step("slow", slow), run.step("quick", quick), charge_later()))

    return agent


async def test_a_gather_whose_unfinished_branch_precedes_the_failed_one_is_retried(
    store_factory: StoreFactory,
) -> None:
    ran: list[str] = []
    before = create_test_unit({"a": gathering(ran, bug=True)}, store_factory())
    failed = await before.run("a")
    assert failed.status == RunStatus.failed and failed.error is not None and failed.error.step == "charge"
    await asyncio.sleep(1.2)  # the slow branch ends after the run failed: its outcome is not the run's
    fixed = create_test_unit({"a": gathering(ran, bug=False)}, store_factory(), clock=before.clock)
    done = await fixed.engine.retry(failed.id, wait=True)
    assert done.status == RunStatus.completed, done.error
    assert done.output == ["slow", "quick", "charged"]
    assert ran.count("load") == 1 and ran.count("quick") == 1 and ran.count("charge") == 2
    await before.close()
    await fixed.close()
