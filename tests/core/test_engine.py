"""The run engine: statuses, cancellation, budgets, sweeps, retention and bad input."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any

import pytest
from pydantic import BaseModel

from agent_unit import (
    AgentNotFound,
    InvalidAnswer,
    InvalidInput,
    NotInterrupted,
    Run,
    RunConflict,
    RunEngine,
    RunNotFound,
    RunStatus,
    define_agent,
)
from agent_unit._records import RunRecord
from agent_unit.stores.memory import MemoryStore
from agent_unit.testing import create_test_unit

from ..conftest import StoreFactory


class Order(BaseModel):
    order_id: str
    amount: int = 1


SCHEMA_BUILDS: list[str] = []


class Signoff(BaseModel):
    """An answer class that counts how often pydantic builds its JSON Schema."""

    approved: bool

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> Any:
        SCHEMA_BUILDS.append(cls.__name__)
        return handler(core_schema)


@define_agent(description="Waits for a human.")
async def waiter(input: Order, run: Run) -> str:
    await run.step("load", lambda: input.order_id)
    await run.interrupt("approve")
    return "done"


@define_agent
async def sleeper(input: None, run: Run) -> str:
    await run.sleep("1h")
    return "rested"


async def test_bad_input_is_a_clear_error_and_creates_no_run(store_factory: StoreFactory) -> None:
    unit = create_test_unit({"waiter": waiter}, store_factory())
    with pytest.raises(InvalidInput) as caught:
        await unit.run("waiter", {"order_id": 5, "amount": "lots"})
    assert "invalid input for agent 'waiter'" in caught.value.message and "and 1 more" in caught.value.message
    assert [error["loc"] for error in caught.value.details] == [("order_id",), ("amount",)]
    assert (await unit.engine.list()).runs == []


async def test_unknown_agent_and_unknown_run() -> None:
    unit = create_test_unit({"waiter": waiter})
    with pytest.raises(AgentNotFound, match="no agent named 'nope' \\(agents: waiter\\)"):
        await unit.run("nope", {})
    for call in (unit.get, unit.cancel, lambda run_id: unit.resume(run_id, True), unit.engine.delete):
        with pytest.raises(RunNotFound, match="run 'run_missing' does not exist"):
            await call("run_missing")


async def test_resume_of_a_run_that_is_not_interrupted_is_a_conflict() -> None:
    unit = create_test_unit({"waiter": waiter, "sleeper": sleeper})
    parked = await unit.run("waiter", {"order_id": "o"})
    done = await unit.resume(parked.id, None)
    with pytest.raises(NotInterrupted, match="is completed, not interrupted"):
        await unit.resume(done.id, None)
    sleeping = await unit.run("sleeper")
    with pytest.raises(NotInterrupted):
        await unit.resume(sleeping.id, None)
    assert NotInterrupted.status == RunConflict.status == 409


@define_agent
async def twice(input: None, run: Run) -> list[str]:
    first = await run.interrupt("first", answer=str)
    second = await run.interrupt("second", answer=int)
    return [first, str(second)]


async def test_a_resume_handed_a_stale_record_answers_as_a_fresh_read_would() -> None:
    unit = create_test_unit({"twice": twice, "waiter": waiter})
    engine = unit.engine
    parked = await unit.run("twice")
    stale = parked.model_copy(deep=True)
    moved = await engine.resume(parked.id, "a", wait=True)
    assert moved.interrupt is not None and moved.interrupt.name == "second"
    # The stale record waits at "first" (whose answer is a str): the run waits at "second" (an int).
    done = await engine.resume(parked.id, 7, wait=True, record=stale)
    assert done.status == RunStatus.completed and done.output == ["a", "7"]
    assert stale == parked  # the caller's record is left as it was
    with pytest.raises(NotInterrupted, match="is completed"):
        await engine.resume(parked.id, 8, record=stale)
    other = await unit.run("waiter", {"order_id": "o"})
    with pytest.raises(NotInterrupted, match="is completed"):
        await engine.resume(parked.id, "x", record=other)  # another run's record is not used
    assert (await engine.get(other.id)).status == RunStatus.interrupted


@pytest.mark.parametrize("status", ["running", "interrupted", "sleeping", "queued"])
async def test_cancel_each_live_status(status: str) -> None:
    started = asyncio.Event()

    async def forever() -> None:
        await asyncio.sleep(3600)

    @define_agent
    async def agent(input: str, run: Run) -> str:
        await run.step("first", lambda: 1)
        if input == "running":
            started.set()
            await run.step("forever", forever)
        elif input == "interrupted":
            await run.interrupt("wait")
        elif input == "sleeping":
            await run.sleep("1d")
        await run.step("second", lambda: 2)
        return "never cancelled"

    budget = "0s" if status == "queued" else None
    unit = create_test_unit({"a": agent}, budget=budget, on_continue=lambda run_id: None)
    if status == "running":
        record = await unit.engine.start("a", status)
        await started.wait()
    else:
        record = await unit.run("a", status)
    assert (await unit.get(record.id)).status == status
    cancelled = await unit.cancel(record.id)
    assert cancelled.status == RunStatus.cancelled and cancelled.finished_at is not None
    await unit.engine.wait(record.id)
    final = await unit.get(record.id)
    assert final.status == RunStatus.cancelled and final.output is None
    assert (await unit.events(record.id))[-1]["type"] == "RUN_CANCELLED"
    with pytest.raises(RunConflict, match="already cancelled"):
        await unit.cancel(record.id)
    await unit.advance("2d")  # nothing wakes a cancelled run
    assert (await unit.get(record.id)).status == RunStatus.cancelled


async def test_budget_yields_at_step_boundaries_and_continues_in_process() -> None:
    counts: dict[str, int] = {}

    @define_agent
    async def agent(input: int, run: Run) -> int:
        total = 0
        for i in range(input):

            def work(i: int = i) -> int:
                counts[f"s{i}"] = counts.get(f"s{i}", 0) + 1
                return i

            total += await run.step("work", work)
        return total

    unit = create_test_unit({"a": agent}, budget="0s")  # yield after every step
    record = await unit.run("a", 5)
    assert record.status == RunStatus.completed and record.output == 10
    assert counts == {f"s{i}": 1 for i in range(5)}
    types = [event["type"] for event in await unit.events(record.id)]
    assert types.count("CUSTOM") == 4  # four yields, each continued


async def test_budget_continue_hook_hands_the_run_to_the_host() -> None:
    handed: list[str] = []

    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.step("one", lambda: 1)
        await run.step("two", lambda: 2)
        return "done"

    unit = create_test_unit({"a": agent}, budget="0s", on_continue=handed.append)
    record = await unit.run("a")
    assert record.status == RunStatus.queued and handed == [record.id]
    done = await unit.engine.continue_run(record.id, wait=True)
    assert done.status == RunStatus.completed
    with pytest.raises(RunConflict, match="not waiting to continue"):
        await unit.engine.continue_run(record.id)


async def test_a_lost_continuation_is_picked_up_by_the_sweep() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.step("one", lambda: 1)
        await run.step("two", lambda: 2)
        return "done"

    def lose(run_id: str) -> None:
        raise ConnectionError("the host's continue endpoint is down")

    unit = create_test_unit({"a": agent}, budget="0s", on_continue=lose, lease_ttl="30s")
    record = await unit.run("a")
    await asyncio.sleep(0)
    assert (await unit.get(record.id)).status == RunStatus.queued
    await unit.advance("31s")
    await unit.advance("31s")
    assert (await unit.get(record.id)).status == RunStatus.completed


async def test_schedule_wake_hook_replaces_timers() -> None:
    scheduled: list[tuple[str, datetime]] = []

    async def schedule(run_id: str, at: datetime) -> None:
        scheduled.append((run_id, at))

    engine = RunEngine({"sleeper": sleeper}, MemoryStore(), schedule_wake=schedule)
    record = await engine.start("sleeper", None, wait=True)
    assert record.status == RunStatus.sleeping
    assert scheduled == [(record.id, record.wake_at)] and engine._timers == {}
    with pytest.raises(RunConflict):
        await engine.continue_run(record.id)
    await engine.aclose()


async def test_in_process_timer_wakes_a_short_sleep() -> None:
    @define_agent
    async def napper(input: None, run: Run) -> str:
        await run.sleep("50ms")
        return "awake"

    engine = RunEngine({"napper": napper}, MemoryStore())
    record = await engine.start("napper", None, wait=True)
    assert record.status == RunStatus.sleeping and record.id in engine._timers
    for _ in range(100):
        await asyncio.sleep(0.01)
        if (await engine.get(record.id)).status == RunStatus.completed:
            break
    assert (await engine.get(record.id)).output == "awake"
    await engine.aclose()


async def test_wake_before_time_does_nothing_and_wake_of_a_non_sleeper_conflicts() -> None:
    unit = create_test_unit({"sleeper": sleeper, "waiter": waiter})
    record = await unit.run("sleeper")
    assert (await unit.engine.wake(record.id)).status == RunStatus.sleeping
    parked = await unit.run("waiter", {"order_id": "o"})
    with pytest.raises(RunConflict, match="not sleeping"):
        await unit.engine.wake(parked.id)


async def test_retention_deletes_finished_runs_after_it_passes() -> None:
    unit = create_test_unit({"waiter": waiter}, retention="7d")
    parked = await unit.run("waiter", {"order_id": "o"})
    done = await unit.resume(parked.id, None)
    await unit.advance("6d")
    assert (await unit.get(done.id)).status == RunStatus.completed
    await unit.advance("2d")
    with pytest.raises(RunNotFound):
        await unit.get(done.id)
    assert await unit.engine.events(done.id) == []


async def test_without_retention_finished_runs_stay() -> None:
    unit = create_test_unit({"waiter": waiter})
    parked = await unit.run("waiter", {"order_id": "o"})
    await unit.resume(parked.id, None)
    await unit.advance("3650d")
    assert (await unit.get(parked.id)).status == RunStatus.completed


async def test_delete_refuses_live_runs_and_removes_finished_ones() -> None:
    unit = create_test_unit({"waiter": waiter})
    parked = await unit.run("waiter", {"order_id": "o"})
    with pytest.raises(RunConflict, match="cancel it before deleting"):
        await unit.engine.delete(parked.id)
    await unit.cancel(parked.id)
    await unit.engine.delete(parked.id)
    with pytest.raises(RunNotFound):
        await unit.get(parked.id)


async def test_list_is_an_approvals_inbox() -> None:
    unit = create_test_unit({"waiter": waiter, "sleeper": sleeper})
    parked = [await unit.run("waiter", {"order_id": str(i)}, thread_id="t") for i in range(3)]
    await unit.run("sleeper")
    inbox = await unit.engine.list(status="interrupted")
    assert {run.id for run in inbox.runs} == {run.id for run in parked}
    assert len((await unit.engine.list(agent="sleeper")).runs) == 1
    assert len((await unit.engine.list(thread_id="t", limit=2)).runs) == 2
    with pytest.raises(Exception, match="unknown status 'parked'"):
        await unit.engine.list(status="parked")


async def test_sweep_reads_only_due_runs() -> None:
    calls: list[float] = []

    class CountingStore(MemoryStore):
        async def due_runs(self, *, before: float, limit: int = 100) -> list[Any]:
            due = await super().due_runs(before=before, limit=limit)
            calls.append(len(due))
            return due

    store = CountingStore()
    unit = create_test_unit({"waiter": waiter, "sleeper": sleeper}, store)
    for i in range(20):
        await unit.run("waiter", {"order_id": str(i)})  # parked forever: never due
    sleepers = [await unit.run("sleeper") for _ in range(3)]
    calls.clear()
    result = await unit.engine.sweep(wait=True)
    assert result.woken == 0 and calls == [0]
    await unit.advance("1h")
    assert calls[-1] == 3
    assert [(await unit.get(run.id)).output for run in sleepers] == ["rested"] * 3


async def test_a_replay_loads_the_journal_in_one_round_trip() -> None:
    loads: list[str] = []

    class CountingStore(MemoryStore):
        async def load_journal(self, run_id: str) -> Any:
            loads.append(run_id)
            return await super().load_journal(run_id)

    @define_agent
    async def many(input: int, run: Run) -> int:
        for i in range(input):
            await run.step("s", lambda i=i: i)
        await run.interrupt("wait")
        return input

    unit = create_test_unit({"many": many}, CountingStore())
    parked = await unit.run("many", 200)
    loads.clear()
    done = await unit.resume(parked.id, None)
    assert done.output == 200 and loads == [parked.id]


async def test_output_must_fit_the_return_annotation() -> None:
    @define_agent
    async def liar(input: None, run: Run) -> int:
        return "not a number"  # type: ignore[return-value]

    record = await create_test_unit({"liar": liar}).run("liar")
    assert record.status == RunStatus.failed and record.error is not None
    assert "does not fit its return type" in record.error.message


async def test_failure_is_recorded_with_an_error_event() -> None:
    @define_agent
    async def broken(input: None, run: Run) -> None:
        raise LookupError("no such order")

    unit = create_test_unit({"broken": broken})
    record = await unit.run("broken")
    assert record.status == RunStatus.failed and record.error is not None
    assert (record.error.type, record.error.message) == ("LookupError", "no such order")
    last = (await unit.events(record.id))[-1]
    assert last["type"] == "RUN_ERROR" and last["message"] == "no such order"


async def test_text_deltas_within_the_window_are_merged() -> None:
    from agent_unit._events import EventBuffer

    batched, unbatched = EventBuffer(50), EventBuffer(0)
    for buffer in (batched, unbatched):
        for word in ("Hel", "lo", " world"):
            buffer.add({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": word})
        buffer.add({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m2", "delta": "x"})
        buffer.add({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"a"'})
        buffer.add({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": ":1}"})
    import json

    merged = [json.loads(event) for event in batched.drain()]
    assert [e.get("delta") for e in merged] == ["Hello world", "x", '{"a":1}']
    assert len(unbatched.drain()) == 6


@pytest.mark.parametrize("name", ["s", "é", 'a"b\n\\', "lone \ud800 half", "pair \U0001f600", ""])
def test_a_step_event_is_the_text_the_encoder_writes(name: str) -> None:
    """STEP_STARTED and STEP_FINISHED are written from text kept per step name, not by the
    encoder: the text must be the encoder's, made storable, for any name (the second use of a
    name is the kept text); other shapes (another key order, a fourth key) go to the encoder."""
    import json

    from agent_unit._events import dumps
    from agent_unit._jsontext import scrub

    encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for kind in ("STEP_STARTED", "STEP_FINISHED"):
        for event in (
            {"type": kind, "stepName": name, "timestamp": 1764688000123},
            {"type": kind, "stepName": name, "timestamp": 7},
            {"stepName": name, "type": kind, "timestamp": 7},
            {"type": kind, "stepName": name, "timestamp": 7, "metadata": {"x": 1}},
            {"type": kind, "stepName": name, "timestamp": True},
        ):
            assert dumps(event) == scrub(encoder.encode(event))
            assert dumps(event) == scrub(encoder.encode(event))


async def test_a_steps_events_are_the_text_their_dicts_would_be() -> None:
    """run.step adds its STEP_STARTED and STEP_FINISHED as JSON text, not dicts: each stored event
    must be exactly the text the dict (its keys in order, its millisecond timestamp) encodes to;
    a failed step's STEP_FINISHED still carries its error."""
    from agent_unit._events import dumps

    @define_agent
    async def agent(input: None, run: Run) -> None:
        await run.step('é "quoted" \U0001f600', lambda: 1)
        with pytest.raises(ZeroDivisionError):
            await run.step("fails", lambda: 1 / 0)

    unit = create_test_unit({"a": agent})
    record = await unit.run("a")
    stored = [event for event in await unit.engine.events(record.id) if '"type":"STEP_' in event.data]
    assert [json.loads(event.data)["type"] for event in stored] == ["STEP_STARTED", "STEP_FINISHED"] * 2
    for event in stored[:3]:
        data = json.loads(event.data)
        assert list(data) == ["type", "stepName", "timestamp"] and type(data["timestamp"]) is int
        assert event.data == dumps(data)
    assert [json.loads(event.data)["stepName"] for event in stored] == ['é "quoted" \U0001f600'] * 2 + ["fails"] * 2
    failed = json.loads(stored[3].data)
    assert failed["metadata"]["agent-unit"]["status"] == "failed"


@define_agent
async def shapes(input: str, run: Run) -> Any:
    value = await run.step("value", lambda: {"tuple": (1, 2.5), 3: "int key", "text": "é\n"})
    if input == "interrupt":
        return await run.interrupt("ask", {"seen": value, 4: (5,)}, answer=dict[int, str], timeout="1d")
    if input == "sleep":
        await run.sleep("1h")
    if input == "fail":
        raise LookupError("no such order: é")
    return {"value": value, 6: (7, None)}


@pytest.mark.parametrize("ending", ["complete", "interrupt", "sleep", "fail"])
async def test_a_waited_run_is_the_record_the_store_holds(store_factory: StoreFactory, ending: str) -> None:
    """A wait answers with the record its execution saved, no read: it must be what a read gives."""
    store = store_factory()
    unit = create_test_unit({"shapes": shapes}, store)
    waited = await unit.engine.start("shapes", ending, wait=True)
    assert waited.status == {"complete": "completed", "interrupt": "interrupted", "sleep": "sleeping"}.get(
        ending, "failed"
    )
    assert waited == await store.load_run(waited.id)
    if ending == "interrupt":
        resumed = await unit.engine.resume(waited.id, {"1": "yes"}, wait=True)
        assert resumed.output == {"1": "yes"} and resumed == await store.load_run(waited.id)


async def test_engine_restart_recovers_a_run_whose_lease_lapsed(store_factory: StoreFactory) -> None:
    ran: list[int] = []

    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.step("one", lambda: ran.append(1))
        await run.step("two", lambda: ran.append(2))
        return "ok"

    store = store_factory()
    first = create_test_unit({"a": agent}, store, lease_ttl="10s")
    # A run that a dead process was executing: leased, never renewed, never finished.
    record = await first.engine.start("a", None)
    first.engine.executing()[record.id].cancel()  # dies before running anything
    await asyncio.sleep(0)
    second = create_test_unit({"a": agent}, store_factory(), clock=first.clock, lease_ttl="10s")
    assert (await second.engine.sweep()).recovered == 0  # lease still valid
    await second.advance("11s")
    done = await second.get(record.id)
    assert done.status == RunStatus.completed and done.attempt == 2 and ran == [1, 2]


async def test_shutdown_hands_a_running_run_back_for_another_process(store_factory: StoreFactory) -> None:
    ran: list[str] = []
    entered = asyncio.Event()

    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.step("one", lambda: ran.append("one"))

        async def slow() -> None:
            ran.append("slow")
            if ran.count("slow") == 1:  # only the first time: the process is stopped in here
                entered.set()
                await asyncio.sleep(3600)

        await run.step("slow", slow)
        await run.step("two", lambda: ran.append("two"))
        return "done"

    first = create_test_unit({"a": agent}, store_factory())
    record = await first.engine.start("a", None)
    await entered.wait()
    await first.close()  # a deploy stops this process mid-step
    released = await first.get(record.id)
    assert released.status == RunStatus.queued and released.lease_owner is None
    second = create_test_unit({"a": agent}, store_factory(), clock=first.clock)
    result = await second.engine.sweep(wait=True)  # due at once: no waiting for a lease to lapse
    assert result.recovered == 1
    assert (await second.get(record.id)).output == "done"
    assert ran == ["one", "slow", "slow", "two"]  # the interrupted step runs again; the finished one does not


async def test_a_long_sleep_wakes_by_the_background_sweep() -> None:
    @define_agent
    async def napper(input: None, run: Run) -> str:
        await run.sleep("0.3s")  # longer than the sweep interval: no timer, the sweep wakes it
        return "awake"

    engine = RunEngine({"napper": napper}, MemoryStore(), sweep_interval="0.1s")
    record = await engine.start("napper", None, wait=True)
    assert record.status == RunStatus.sleeping and engine._timers == {}
    for _ in range(100):
        await asyncio.sleep(0.02)
        if (await engine.get(record.id)).status == RunStatus.completed:
            break
    assert (await engine.get(record.id)).output == "awake"
    await engine.aclose()


async def test_an_unknown_status_is_a_422() -> None:
    from agent_unit.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as caught:
        await create_test_unit({}).engine.list(status="parked")
    assert caught.value.status == 422


async def test_a_renewal_in_flight_never_costs_the_outcome_save() -> None:
    class SlowStore(MemoryStore):
        """A networked store: the renewal lands, then its answer takes a while to come back."""

        async def renew_lease(self, run_id: str, *, owner: str, expires: float) -> int | None:
            version = await super().renew_lease(run_id, owner=owner, expires=expires)
            await asyncio.sleep(0.2)
            return version

    @define_agent
    async def agent(input: None, run: Run) -> str:
        await asyncio.sleep(0.15)  # the agent ends while a renewal (every 0.1 s) is in flight
        return "done"

    engine = RunEngine({"a": agent}, SlowStore(), lease_ttl="0.3s", background_sweep=False)
    record = await engine.start("a", None, wait=True)
    assert record.status == RunStatus.completed and record.output == "done"
    await engine.aclose()


async def test_answer_classes_are_never_imported_from_the_store() -> None:
    import sys

    from agent_unit._answers import resolve_type_ref

    assert "this_module_does_not_exist" not in sys.modules
    assert resolve_type_ref("this_module_does_not_exist:Anything", {}) is None
    assert resolve_type_ref("json:JSONDecodeError", {}) is None  # not a model of that schema
    assert resolve_type_ref(f"{Order.__module__}:Order", Order.model_json_schema()) is Order
    assert resolve_type_ref(f"{Order.__module__}:Order", {"type": "object"}) is None  # changed since: use the schema


def test_a_tool_approval_is_checked_in_a_fresh_process_that_cannot_import_jsonschema() -> None:
    """A Worker resuming a framework's tool approval in a new isolate: the adapter's answer class
    is not loaded yet, and jsonschema (its rpds-py has no Pyodide wheel) is not there."""
    import subprocess
    import sys

    script = """
import sys
sys.modules["jsonschema"] = None  # as in a Worker: importing it fails
from agent_unit._answers import check_answer
from agent_unit.errors import InvalidAnswer
from agent_unit._records import Interrupt, RunRecord
from pydantic import TypeAdapter
from agent_unit._answers import type_ref
from agent_unit.adapters.approval import ApprovalAnswer  # the answer type ask_approval gives run.interrupt
ref, schema = type_ref(ApprovalAnswer), TypeAdapter(ApprovalAnswer).json_schema()
del sys.modules["agent_unit.adapters.approval"]  # the resuming process has not run the agent yet
record = RunRecord.model_construct(
    interrupt=Interrupt.model_construct(name="tool-approval", answer_type=ref, answer_schema=schema)
)
print(check_answer(record, {"approved": True}))
try:
    check_answer(record, {"approved": "maybe"})
except InvalidAnswer as error:
    print("refused:", error)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == '{"approved":true}' and "refused: the answer does not fit" in done.stdout


async def test_resumes_with_a_model_answer_build_its_json_schema_once_not_per_resume() -> None:
    @define_agent
    async def signs(input: None, run: Run) -> bool:
        answer = await run.interrupt("sign", answer=Signoff)
        return answer.approved

    unit = create_test_unit({"signs": signs})
    parked = [await unit.run("signs") for _ in range(4)]
    SCHEMA_BUILDS.clear()
    for record in parked:
        assert (await unit.resume(record.id, {"approved": True})).output is True
    assert len(SCHEMA_BUILDS) <= 1  # the check that the class still has the interrupt's schema is cached
    with pytest.raises(InvalidAnswer):  # and a wrong answer is still refused by the class
        parked_again = await unit.run("signs")
        await unit.resume(parked_again.id, {"approved": "not a flag"})


async def test_a_host_that_sweeps_gets_no_in_process_timers() -> None:
    """Serverless (background_sweep off): a timer could fire inside a later, unrelated invocation."""

    @define_agent
    async def napper(input: None, run: Run) -> str:
        await run.sleep("50ms")
        return "awake"

    engine = RunEngine({"napper": napper}, MemoryStore(), background_sweep=False)
    record = await engine.start("napper", None, wait=True)
    assert record.status == RunStatus.sleeping and record.id not in engine._timers
    await asyncio.sleep(0.1)
    assert (await engine.get(record.id)).status == RunStatus.sleeping  # only the host's sweep wakes it
    assert (await engine.sweep(wait=True)).woken == 1
    assert (await engine.get(record.id)).output == "awake"
    await engine.aclose()


async def test_a_step_that_outlives_its_lease_cannot_write_through_a_later_claim_in_this_process() -> None:
    """Each claim has its own lease token: the late step's write is refused and the resumed run finishes."""
    ran: list[str] = []

    @define_agent
    async def slow_then_ask(input: None, run: Run) -> str:
        async def slow() -> str:
            ran.append("slow")
            await asyncio.sleep(1.5)  # longer than the lease: the park stops waiting for it
            return "slow done"

        results = await asyncio.gather(run.step("slow", slow), run.interrupt("ask", None))
        return f"{results[0]} / {results[1]}"

    engine = RunEngine({"a": slow_then_ask}, MemoryStore(), lease_ttl="1s", background_sweep=False)
    parked = await engine.start("a", None, wait=True)
    assert parked.status == RunStatus.interrupted
    done = await engine.resume(parked.id, "yes", wait=True)
    await asyncio.sleep(0.7)  # the first execution's slow step finishes now, under the old claim
    assert done.status == RunStatus.completed, done.error
    assert done.output == "slow done / yes"
    final = await engine.get(parked.id)
    assert final.status == RunStatus.completed and final.output == "slow done / yes"
    await engine.aclose()


class RefusesThePast(asyncio.SelectorEventLoop):
    """Pyodide's event loop (a Worker's) as it schedules a timer: ``call_at`` is ``call_later`` of
    ``when - time()``, and a negative delay raises ``ValueError("Can't schedule in the past")``."""

    def call_later(self, delay: float, callback: Any, *args: Any, context: Any = None) -> Any:
        if delay < 0:
            raise ValueError("Can't schedule in the past")
        return super().call_at(self.time() + delay, callback, *args, context=context)

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None) -> Any:
        return self.call_later(when - self.time(), callback, *args, context=context)


def test_a_run_with_custom_events_and_steps_completes_on_a_loop_that_refuses_to_schedule_in_the_past() -> None:
    @define_agent
    async def emits(input: None, run: Run) -> str:
        await run.emit("progress", {"done": 1})  # its flush is due at once: by then "at once" is past
        await run.step("one", lambda: 1)
        return "done"

    async def main() -> RunRecord:
        engine = RunEngine({"emits": emits}, MemoryStore(), background_sweep=False)
        try:
            return await engine.start("emits", None, wait=True)
        finally:
            await engine.aclose()

    loop = RefusesThePast()
    try:
        record = loop.run_until_complete(main())
    finally:
        loop.close()
    assert record.status == RunStatus.completed, record.error


RUNS: list[Any] = []  # weak references to the Run objects agent code was handed


@define_agent
async def remembered(input: None, run: Run) -> str:
    import weakref

    RUNS.append(weakref.ref(run))
    await run.step("load", lambda: "loaded")
    await run.interrupt("approve")
    return "done"


@define_agent
async def remembered_in_a_task_group(input: None, run: Run) -> str:
    """Parks inside a task group, as a framework's parallel tool calls do: the park comes wrapped."""
    import weakref

    RUNS.append(weakref.ref(run))
    async with asyncio.TaskGroup() as group:
        group.create_task(run.interrupt("approve"))
    return "done"


@pytest.mark.parametrize("agent", [remembered, remembered_in_a_task_group], ids=["plain", "task-group"])
async def test_an_execution_that_parks_or_ends_is_freed_without_the_garbage_collector(agent: Any) -> None:
    """No reference cycle holds an execution's objects (its run, record, journal and buffers) once it
    parks or ends: they are freed then, not left for the cyclic collector to find (a cost on every run)."""
    import gc

    unit = create_test_unit({"agent": agent})
    RUNS.clear()
    gc.collect()
    gc.disable()
    try:
        parked = await unit.run("agent")
        await asyncio.sleep(0)  # the execution's task is forgotten by a callback of its own
        assert parked.status == "interrupted" and [ref() for ref in RUNS] == [None]  # gone already
        done = await unit.resume(parked.id, True)
        await asyncio.sleep(0)
        assert done.output == "done" and [ref() for ref in RUNS] == [None, None]
    finally:
        gc.enable()
