"""``TemporalEngine`` in one process (the app and its worker), against a real Temporal dev server.

The engine's guarantees that do not need several processes: what a start does when Temporal is
out of reach, a wrong or late answer, a run that yields at its budget, a run that fails.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agent_unit import Run, RunEngine, define_agent, telemetry
from agent_unit._records import RunRecord
from agent_unit.errors import EngineUnavailable, InvalidAnswer, NotInterrupted, RunConflict
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.temporal import TemporalSettings

from ..support.otel_spans import Spans
from ..support.server import free_port
from ..support.temporal import TemporalServer

# The engine (and the Temporal SDK under it) is imported where one is made, not here: it costs
# ~0.3 s of CPU, which every pytest worker would otherwise pay to collect this module.
if TYPE_CHECKING:
    from agent_unit.temporal import TemporalEngine

pytestmark = pytest.mark.slow

_queues = itertools.count()


@define_agent
async def ask(input: str, run: Run) -> str:
    first = await run.interrupt("first", input, answer=bool)
    second = await run.interrupt("second", input, answer=bool)
    return f"{first}/{second}"


@define_agent
async def long(input: int, run: Run) -> int:
    total = 0
    for i in range(input):
        total += await run.step("s", lambda i=i: i)
    return total


@define_agent
async def broken(input: str, run: Run) -> str:
    await run.step("ok", lambda: 1)
    raise ValueError(f"no refund for {input}")


@define_agent
async def dawdle(input: float, run: Run) -> bool:
    await run.step("slow", lambda: asyncio.sleep(input))
    answer = await run.interrupt("then", None, answer=bool)
    await run.step("slow-again", lambda: asyncio.sleep(input))
    return answer


AGENTS = {"ask": ask, "long": long, "broken": broken, "dawdle": dawdle}


def engine(tmp_path: Path, address: str, **options: object) -> TemporalEngine:
    from agent_unit.temporal import TemporalEngine

    settings = TemporalSettings(address=address, task_queue=f"engine-{next(_queues)}", heartbeat="2s")
    return TemporalEngine(AGENTS, f"sqlite:///{tmp_path / 'runs.db'}", temporal=settings, worker=True, **options)


async def test_a_start_temporal_refuses_is_a_503_and_leaves_no_run_behind(tmp_path: Path) -> None:
    nowhere = engine(tmp_path, f"127.0.0.1:{free_port()}")
    try:
        with pytest.raises(EngineUnavailable, match="cannot be reached"):
            await nowhere.start("ask", "x")
        assert (await nowhere.list()).runs == []
    finally:
        await nowhere.aclose()


async def test_an_answer_for_another_interrupt_or_a_bad_one_leaves_the_run_parked(
    tmp_path: Path, temporal_server: TemporalServer
) -> None:
    unit = engine(tmp_path, temporal_server.address)
    unit.start_background()
    try:
        parked = await unit.start("ask", "x", wait=True)
        assert parked.interrupt is not None and parked.interrupt.name == "first"
        with pytest.raises(InvalidAnswer):
            await unit.resume(parked.id, "not a bool")
        with pytest.raises(RunConflict):
            await unit.resume(parked.id, True, interrupt_key="interrupt:second#0")
        assert (await unit.get(parked.id)).status.value == "interrupted"

        second = await unit.resume(
            parked.id, True, wait=True, interrupt_key=parked.interrupt.key, answered_by="alice@example.com"
        )
        assert second.interrupt is not None and second.interrupt.name == "second"
        assert [(a.interrupt, a.by) for a in second.answers] == [("first", "alice@example.com")]  # who answered
        with pytest.raises(RunConflict):  # the first interrupt's answer, sent again late
            await unit.resume(parked.id, True, interrupt_key=parked.interrupt.key)
        done = await unit.resume(parked.id, False, wait=True)
        assert done.status.value == "completed" and done.output == "True/False"
        with pytest.raises(NotInterrupted):
            await unit.resume(parked.id, True)
    finally:
        await unit.aclose()


async def test_runs_temporal_starts_count_as_started_and_a_cancel_as_finished_once(
    tmp_path: Path, temporal_server: TemporalServer
) -> None:
    spans = Spans()
    nowhere = engine(tmp_path / "nowhere", f"127.0.0.1:{free_port()}")
    unit = engine(tmp_path, temporal_server.address)
    unit.start_background()
    try:
        with pytest.raises(EngineUnavailable):  # refused: no run, so none started
            await nowhere.start("ask", "x")
        parked = await unit.start("ask", "x", wait=True)
        assert parked.status.value == "interrupted"
        assert (await unit.cancel(parked.id)).status.value == "cancelled"
    finally:
        await nowhere.aclose()
        await unit.aclose()
        telemetry.reset()
    (started,) = spans.points("agent_unit.runs.started")
    assert dict(started.attributes) == {"agent_unit.agent": "ask"} and started.value == 1
    (finished,) = spans.points("agent_unit.runs.finished")
    assert dict(finished.attributes) == {"agent_unit.agent": "ask", "agent_unit.run.status": "cancelled"}
    assert finished.value == 1


async def test_a_run_that_yields_at_its_budget_continues_in_the_worker(
    tmp_path: Path, temporal_server: TemporalServer
) -> None:
    unit = engine(tmp_path, temporal_server.address, budget="0.05s")
    unit.start_background()
    try:
        done = await unit.start("long", 3000, wait=True)
        assert done.status.value == "completed", done.error
        assert done.output == sum(range(3000))
        names = [event.to_dict().get("name") for event in await unit.events(done.id)]
        assert names.count("agent-unit.yield") >= 1  # it did yield, and went on
    finally:
        await unit.aclose()


async def test_a_run_that_fails_ends_failed_and_its_workflow_completes(
    tmp_path: Path, temporal_server: TemporalServer
) -> None:
    unit = engine(tmp_path, temporal_server.address)
    unit.start_background()
    try:
        done = await unit.start("broken", "o-1", wait=True)
        assert done.status.value == "failed"
        assert done.error is not None and done.error.message == "no refund for o-1"
        handle = (await unit.client()).get_workflow_handle(done.id)
        assert (await handle.result())["status"] == "failed"
    finally:
        await unit.aclose()


@define_agent
async def slow_step(input: str, run: Run) -> str:
    async def work() -> str:
        STEPS.append("started")
        STARTED[0].set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            STEPS.append("stopped")
            raise
        STEPS.append("finished")
        return "done"

    return await run.step("work", work)


STEPS: list[str] = []
STARTED: list[asyncio.Event] = []
AGENTS["slow_step"] = slow_step


async def test_a_run_cancelled_mid_step_stops_executing_in_its_worker_at_once(
    tmp_path: Path, temporal_server: TemporalServer
) -> None:
    from agent_unit.temporal import TemporalEngine

    settings = TemporalSettings(address=temporal_server.address, task_queue=f"engine-{next(_queues)}", heartbeat="30s")
    unit = TemporalEngine(AGENTS, f"sqlite:///{tmp_path / 'runs.db'}", temporal=settings, worker=True)
    unit.start_background()
    STEPS.clear()
    STARTED[:] = [asyncio.Event()]
    try:
        run = await unit.start("slow_step", "x")
        await asyncio.wait_for(STARTED[0].wait(), 30)
        cancelled = await unit.cancel(run.id)
        assert cancelled.status.value == "cancelled"
        # Not at the lease's next renewal (every 10 s with a 30 s heartbeat): now.
        await asyncio.sleep(2)
        assert STEPS == ["started", "stopped"]
        assert (await unit.get(run.id)).status.value == "cancelled"
    finally:
        await unit.aclose()


async def test_a_workflow_whose_run_the_store_does_not_have_ends_instead_of_retrying_forever(
    tmp_path: Path, temporal_server: TemporalServer
) -> None:
    unit = engine(tmp_path, temporal_server.address)
    unit.start_background()
    try:
        client = await unit.client()
        handle = await client.start_workflow(
            "agent-unit.run",
            {"run_id": "run_never_kept", "heartbeat": 2},
            id=f"run_never_kept_{next(_queues)}",
            task_queue=unit.task_queue,
        )
        result = await asyncio.wait_for(handle.result(), 30)
        assert result["status"] == "deleted"
    finally:
        await unit.aclose()


async def test_a_retry_temporal_refuses_is_a_503_and_leaves_the_run_failed_as_it_was(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    native = RunEngine(AGENTS, store)
    nowhere = engine(tmp_path, f"127.0.0.1:{free_port()}")
    try:
        failed = await native.start("broken", "o-2", wait=True)
        assert failed.status.value == "failed"
        with pytest.raises(EngineUnavailable, match="cannot be reached"):
            await nowhere.retry(failed.id)
        again = await nowhere.get(failed.id)
        assert again.status.value == "failed" and again.attempt == 1 and again.error == failed.error
        types = [event.to_dict()["type"] for event in await nowhere.events(failed.id)]
        assert types[-1] == "RUN_ERROR"  # a reader of the retry's RUN_STARTED sees it end
        retried = await native.retry(failed.id, wait=True)  # and it can be retried once Temporal is back
        assert retried.status.value == "failed" and retried.attempt == 2
    finally:
        await nowhere.aclose()
        await native.aclose()


class CountingStore(SQLiteStore):
    """The SQLite store, counting the runs it loads: how often a waiter reads the store."""

    loads = 0

    async def load_run(self, run_id: str) -> RunRecord | None:
        self.loads += 1
        return await super().load_run(run_id)


async def test_a_start_or_resume_that_waits_hears_from_the_workflow_instead_of_polling_the_store(
    tmp_path: Path, temporal_server: TemporalServer
) -> None:
    from agent_unit.temporal import TemporalEngine

    worker = engine(tmp_path, temporal_server.address)  # the worker, in this process
    worker.start_background()
    store = CountingStore(str(tmp_path / "runs.db"))
    app = TemporalEngine(AGENTS, store, temporal=worker.temporal, worker=False)  # a server apart
    try:
        parked = await app.start("dawdle", 1.5, wait=True)
        assert parked.status.value == "interrupted"
        assert store.loads <= 5, store.loads  # polling every 50 ms for 1.5 s: 30 and more
        store.loads = 0
        done = await app.resume(parked.id, True, wait=True)
        assert done.status.value == "completed" and done.output is True
        assert store.loads <= 5, store.loads
    finally:
        await app.aclose()
        await store.close()
        await worker.aclose()
