"""No value makes work run again: what cannot be stored is the run's error, never a store outage.

Each value here once left a run ``running`` for good (the write failed, the engine took it for an
outage, and every sweep ran the step again) or was accepted and failed the run later.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent_unit import (
    InvalidAnswer,
    InvalidInput,
    Run,
    RunNotFound,
    RunStatus,
    StepResultError,
    UnstorableValue,
    define_agent,
)
from agent_unit._records import RunRecord
from agent_unit.errors import InvalidArgument, StoreUnavailable
from agent_unit.stores.memory import MemoryStore
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import TestUnit, create_test_unit


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


UNSTORABLE = {
    "lone surrogate": "\ud800",
    "surrogate in a key": {"\udc00": 1},
    "NaN": float("nan"),
    "Infinity": [float("inf")],
    "101 levels deep": nested(101),
    "an int of 5,000 digits": 10**5000,
}


@pytest.fixture(params=["memory", "sqlite"])
def unit_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A test unit over the memory store or an SQLite file (the store that refused the surrogate)."""

    def make(agents: dict[str, Any], **options: Any) -> TestUnit:
        store = None if request.param == "memory" else SQLiteStore(tmp_path / "agent-unit.db")
        return create_test_unit(agents, store, **options)

    return make


async def settle_and_sweep(unit: TestUnit, run_id: str) -> None:
    """Let any lease lapse and sweep: a run left ``running`` would be recovered (and re-run) here."""
    await unit.advance("10m")
    await unit.advance("10m")


@pytest.mark.parametrize("value", UNSTORABLE.values(), ids=UNSTORABLE.keys())
async def test_a_step_result_that_cannot_be_stored_fails_the_step_once_naming_it(unit_factory: Any, value: Any) -> None:
    calls: list[int] = []

    def produce():  # type: ignore[no-untyped-def] # unannotated: the result is journaled as it is
        calls.append(1)
        return value

    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.step("produce", produce)
        return "done"

    unit = unit_factory({"a": agent})
    record = await unit.run("a")
    await settle_and_sweep(unit, record.id)
    record = await unit.get(record.id)
    assert record.status == RunStatus.failed and record.error is not None
    assert record.error.type == "StepResultError" and record.error.step == "produce"
    assert "step 'produce'" in record.error.message
    assert len(calls) == 1
    await unit.close()


async def test_a_lone_surrogate_result_never_leaves_the_run_running_on_sqlite(sqlite_path: Path) -> None:
    calls: list[int] = []

    def produce():  # type: ignore[no-untyped-def] # as `lambda: "\ud800"`: no annotation to refuse it
        calls.append(1)
        return "\ud800"

    @define_agent
    async def agent(input: None, run: Run) -> str:
        return await run.step("s", produce)

    unit = create_test_unit({"a": agent}, SQLiteStore(sqlite_path))
    record = await unit.run("a")
    for _ in range(3):
        await unit.advance("1h")
    record = await unit.get(record.id)
    assert record.status == RunStatus.failed and record.error is not None
    assert "step 's'" in record.error.message and "surrogate" in record.error.message
    assert calls == [1]
    await unit.close()


async def test_a_step_error_whose_message_cannot_be_stored_is_journaled_once(unit_factory: Any) -> None:
    calls: list[int] = []

    def fail() -> None:
        calls.append(1)
        raise ValueError("bad \ud800 byte")

    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.step("fail", fail)
        return "done"

    unit = unit_factory({"a": agent})
    record = await unit.run("a")
    await settle_and_sweep(unit, record.id)
    record = await unit.get(record.id)
    assert record.status == RunStatus.failed and record.error is not None
    assert record.error.type == "ValueError" and record.error.step == "fail"
    assert record.error.message == "bad \ufffd byte"
    assert calls == [1]
    await unit.close()


async def test_a_result_that_does_not_read_back_as_its_type_fails_the_step_before_it_is_journaled() -> None:
    calls: list[int] = []

    def ratio() -> float:
        calls.append(1)
        return float("nan")  # pydantic writes NaN as null, which a float cannot be read back from

    @define_agent
    async def agent(input: None, run: Run) -> str:
        try:
            await run.step("ratio", ratio)
        except StepResultError as exc:
            return exc.message
        return "no error"

    unit = create_test_unit({"a": agent})
    record = await unit.run("a")
    assert record.status == RunStatus.completed
    assert "step 'ratio'" in record.output and "read back" in record.output
    assert calls == [1]


async def unstorable_step_name(run: Run, calls: list[int]) -> str:
    await run.step("s\ud800", lambda: calls.append(1))
    return "done"


async def unstorable_output(run: Run, calls: list[int]) -> str:
    await run.step("work", lambda: calls.append(1))
    return "\ud800"


async def sleep_past_9999(run: Run, calls: list[int]) -> str:
    await run.sleep(timedelta(days=3_000_000))  # past the year 9999
    calls.append(1)
    return "woke"


# What the agent does, the error the run fails with, and the step calls that ran (once, or none).
FAILS_THE_RUN = {
    "a step name that cannot be stored: the step does not run": (
        unstorable_step_name,
        ("UnstorableValue", "cannot name a step"),
        [],
    ),
    "an output that cannot be stored: the run is not run again": (
        unstorable_output,
        ("UnstorableValue", "output of agent 'a'"),
        [1],
    ),
    "a sleep past the year 9999: the run does not park forever": (
        sleep_past_9999,
        ("ValueError", "year 9999"),
        [],
    ),
}


@pytest.mark.parametrize(("body", "error", "ran"), FAILS_THE_RUN.values(), ids=FAILS_THE_RUN.keys())
async def test_a_value_that_cannot_be_stored_fails_the_run_and_nothing_runs_again(
    unit_factory: Any, body: Any, error: tuple[str, str], ran: list[int]
) -> None:
    calls: list[int] = []

    @define_agent
    async def agent(input: None, run: Run) -> str:
        return await body(run, calls)  # type: ignore[no-any-return]

    unit = unit_factory({"a": agent})
    record = await unit.run("a")
    await settle_and_sweep(unit, record.id)
    record = await unit.get(record.id)
    assert record.status == RunStatus.failed and record.error is not None and record.output is None
    assert (record.error.type, error[1] in record.error.message) == (error[0], True), record.error
    assert calls == ran
    await unit.close()


async def test_an_output_over_max_step_bytes_fails_the_run_with_a_clear_message() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        return "x" * 2000

    record = await create_test_unit({"a": agent}, max_step_bytes=1000).run("a")
    assert record.status == RunStatus.failed and record.error is not None
    assert "output of agent 'a'" in record.error.message and "max_step_bytes (1,000)" in record.error.message


async def test_an_emit_over_max_step_bytes_or_not_storable_raises_in_the_agent() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> list[str]:
        messages = []
        for value in ("x" * 2000, "\ud800", float("nan")):
            try:
                await run.emit("progress", value)
            except UnstorableValue as exc:
                messages.append(exc.message)
        await run.emit("progress", "small")
        return messages

    unit = create_test_unit({"a": agent}, max_step_bytes=1000)
    record = await unit.run("a")
    assert record.status == RunStatus.completed
    too_large, surrogate, nan = record.output
    assert "event 'progress'" in too_large and "max_step_bytes (1,000)" in too_large
    assert "surrogate" in surrogate and "NaN" in nan
    custom = [e["value"] for e in await unit.events(record.id) if e["type"] == "CUSTOM"]
    assert custom == ["small"]


async def test_a_state_value_that_cannot_be_stored_raises_in_the_agent(unit_factory: Any) -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        try:
            await run.state.set("k", "\ud800")
        except UnstorableValue as exc:
            return exc.message
        return "stored"

    unit = unit_factory({"a": agent})
    record = await unit.run("a")
    assert record.status == RunStatus.completed and "state 'k'" in record.output
    await unit.close()


class Approval(BaseModel):
    approved: bool


@pytest.mark.parametrize(
    "answer",
    [{"approved": True, "note": nested(201)}, {"approved": True, "note": "\ud800"}, {"approved": float("nan")}],
    ids=["201 levels deep", "lone surrogate", "NaN"],
)
async def test_an_answer_that_cannot_be_journaled_is_refused_and_the_run_stays_parked(
    unit_factory: Any, answer: Any
) -> None:
    @define_agent
    async def agent(input: None, run: Run) -> bool:
        decision = await run.interrupt("approve", answer=Approval)
        return decision.approved

    unit = unit_factory({"a": agent})
    parked = await unit.run("a")
    with pytest.raises(InvalidAnswer, match="'approve'"):
        await unit.resume(parked.id, answer)
    assert (await unit.get(parked.id)).status == RunStatus.interrupted
    done = await unit.resume(parked.id, {"approved": True})
    assert done.status == RunStatus.completed and done.output is True
    await unit.close()


async def test_an_untyped_answer_nested_201_levels_is_refused_not_failed_on_replay(unit_factory: Any) -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.interrupt("anything")
        return "done"

    unit = unit_factory({"a": agent})
    parked = await unit.run("a")
    with pytest.raises(InvalidAnswer, match="levels deep"):
        await unit.resume(parked.id, nested(201))
    assert (await unit.get(parked.id)).status == RunStatus.interrupted
    await unit.close()


async def test_an_answer_over_max_step_bytes_is_refused() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        return await run.interrupt("note")

    unit = create_test_unit({"a": agent}, max_step_bytes=1000)
    parked = await unit.run("a")
    with pytest.raises(InvalidAnswer, match="max_step_bytes"):
        await unit.resume(parked.id, "x" * 2000)
    assert (await unit.resume(parked.id, "short")).output == "short"


@pytest.mark.parametrize("value", UNSTORABLE.values(), ids=UNSTORABLE.keys())
async def test_an_input_that_cannot_be_stored_is_refused_and_no_run_is_created(unit_factory: Any, value: Any) -> None:
    @define_agent
    async def agent(input: Any) -> str:
        return "done"

    unit = unit_factory({"a": agent})
    with pytest.raises(InvalidInput, match="input for agent 'a' cannot be stored"):
        await unit.run("a", {"value": value})
    assert (await unit.engine.list()).runs == []
    await unit.close()


@pytest.mark.parametrize(
    "thread_id", ["t\ud800", "t\x00", "t\n", "t" * 257, 42], ids=["surrogate", "NUL", "newline", "257 long", "int"]
)
async def test_a_thread_id_that_is_not_short_printable_text_is_refused(unit_factory: Any, thread_id: Any) -> None:
    @define_agent
    async def agent(input: None) -> str:
        return "done"

    unit = unit_factory({"a": agent})
    with pytest.raises(InvalidArgument, match="thread_id"):
        await unit.run("a", thread_id=thread_id)
    with pytest.raises(InvalidArgument, match="thread_id"):
        await unit.engine.list(thread_id=thread_id)
    assert (await unit.engine.list()).runs == []
    assert (await unit.run("a", thread_id="t" * 256)).status == RunStatus.completed
    await unit.close()


async def test_a_run_id_that_cannot_be_stored_is_not_found(unit_factory: Any) -> None:
    unit = unit_factory({})
    for call in (unit.get, unit.engine.events, unit.cancel):
        with pytest.raises(RunNotFound):
            await call("run_\ud800")
    await unit.close()


class StateOutage(MemoryStore):
    """The first state write finds the store out of reach."""

    def __init__(self) -> None:
        super().__init__()
        self.outages = 1

    async def set_state(self, scope: str, key: str, value: str) -> None:
        if self.outages:
            self.outages -= 1
            raise StoreUnavailable("the store at memory:// cannot be reached")
        await super().set_state(scope, key, value)


async def test_a_state_write_during_an_outage_is_recovered_not_failed() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.state.set("seen", True)
        return "done"

    unit = create_test_unit({"a": agent}, StateOutage())
    record = await unit.run("a")
    assert record.status == RunStatus.running  # stopped, saving nothing: its lease lapses
    await unit.advance("1m")  # the sweep recovers it
    record = await unit.get(record.id)
    assert record.status == RunStatus.completed and record.attempt == 2


class RefusesOneRun(MemoryStore):
    """Refuses every save of one run with an error that is not an outage."""

    refused: str | None = None

    async def save_run(self, record: RunRecord, **kwargs: Any) -> int:
        if record.id == self.refused:
            raise ValueError("refused")
        return await super().save_run(record, **kwargs)


async def test_a_run_the_sweep_cannot_claim_does_not_keep_it_from_the_others() -> None:
    @define_agent
    async def agent(input: str, run: Run) -> str:
        await run.sleep(input)
        return "woke"

    store = RefusesOneRun()
    unit = create_test_unit({"a": agent}, store)
    first, second = await unit.run("a", "1h"), await unit.run("a", "90m")
    store.refused = first.id  # due first: the sweep reads it first
    await unit.advance("2h")
    assert (await unit.get(first.id)).status == RunStatus.sleeping
    assert (await unit.get(second.id)).status == RunStatus.completed


async def test_a_schedule_wake_hook_that_raises_leaves_the_run_sleeping() -> None:
    def schedule_wake(run_id: str, at: datetime) -> None:
        raise ValueError("the scheduler refused")

    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.sleep("1h")
        return "woke"

    unit = create_test_unit({"a": agent}, schedule_wake=schedule_wake)
    record = await unit.run("a")
    assert record.status == RunStatus.sleeping  # the sweep wakes it when it is due
    await unit.advance("2h")
    assert (await unit.get(record.id)).status == RunStatus.completed


async def test_a_small_steps_int_bool_or_none_result_is_journaled_as_json_and_replays_as_itself() -> None:
    """These results skip the encoder (their JSON is written directly): the journal must hold the
    same JSON, a result over max_step_bytes must still be refused, and a huge int still goes the
    general way (JSON readers refuse more than 4,300 digits)."""
    results = [0, -7, 10**18 - 1, 10**18, -(10**18), True, False, None, 10**5000]

    @define_agent
    async def agent(input: int, run: Run) -> Any:
        return await run.step("s", lambda: results[input])

    @define_agent
    async def typed(input: None, run: Run) -> int:
        def seven() -> int:
            return 7

        return await run.step("typed", seven)

    unit = create_test_unit({"a": agent, "t": typed}, max_step_bytes=19)
    for index, value in enumerate(results):
        record = await unit.run("a", index)
        journal = await unit.engine.store.load_journal(record.id)
        if value == 10**5000 or value == -(10**18):  # 20 and 5,001 characters: over max_step_bytes
            assert record.status == RunStatus.failed and record.error is not None
            assert record.error.type == "StepResultError", value
            continue
        assert record.status == RunStatus.completed and record.output == value and type(record.output) is type(value)
        assert [entry.value for entry in journal.values()] == [json.dumps(value)]
    record = await unit.run("t")
    assert record.output == 7 and [e.value for e in (await unit.engine.store.load_journal(record.id)).values()] == ["7"]
