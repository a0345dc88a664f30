"""The engine's guarantees, each proved once against every engine: the native one (leases over the
store) and Temporal's (a real dev server, its worker in this process; one worker process killed).

A scenario here is written against ``RunEngine``'s API and the HTTP app only, so the same test
proves the same guarantee of both engines. Runs keep apart on Temporal by task queue.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_unit import RunEngine, RunRecord, RunStatus, create_agent_unit
from agent_unit.errors import InterruptExpired, NotFailed, RunConflict

from ..support import engine_agents
from ..support.crash import start_and_kill
from ..support.engine_agents import AGENTS
from ..support.sse import sse
from ..support.temporal import TemporalServer, WorkerProcess

ENGINES = ["native", pytest.param("temporal", marks=pytest.mark.slow)]
AGENTS_REF = "tests.support.engine_agents:AGENTS"
HEARTBEAT = "2s"

_queues = itertools.count()


class Subject:
    """The engine under test over a SQLite file, plus what a scenario needs of its kind."""

    def __init__(self, kind: str, tmp_path: Path, temporal: TemporalServer | None) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.db = tmp_path / "runs.db"
        self.store = f"sqlite:///{self.db}"
        self.ledger = tmp_path / "ledger.txt"
        self.ledger.touch()
        self.temporal = temporal
        self.queue = f"parity-{next(_queues)}-{time.monotonic_ns()}"
        self.engines: list[RunEngine] = []
        self.workers: list[WorkerProcess] = []
        self.engine = self.open(worker=True)
        self.engine.start_background()

    def open(
        self,
        *,
        worker: bool,
        queue: str | None = None,
        agents: dict[str, Any] | None = None,
        store: str | None = None,
        **options: Any,
    ) -> RunEngine:
        """Another engine over the same store (and, on Temporal, the same task queue): another server.
        Other ``agents`` need a ``store`` and ``queue`` of their own: a server without an agent fails its runs."""
        engine: RunEngine
        agents, store = AGENTS if agents is None else agents, store or self.store
        if self.temporal is None:
            engine = RunEngine(agents, store, lease_ttl=HEARTBEAT, **options)
        else:
            from agent_unit.temporal import TemporalEngine

            engine = TemporalEngine(agents, store, temporal=self.settings(queue), worker=worker, **options)
        self.engines.append(engine)
        return engine

    def settings(self, queue: str | None = None) -> Any:
        from agent_unit.temporal import TemporalSettings

        assert self.temporal is not None
        return TemporalSettings(address=self.temporal.address, task_queue=queue or self.queue, heartbeat=HEARTBEAT)

    def lines(self, prefix: str) -> list[str]:
        return [line for line in self.ledger.read_text().splitlines() if line.startswith(prefix)]

    async def kill_mid_step(self, agent: str) -> tuple[RunEngine, str]:
        """Start ``agent`` in another process, SIGKILL that process inside a step, and hand the run
        to an engine of this process: the engine to watch, and the run id."""
        marker = self.tmp_path / "marker"
        env = {"LEDGER_FILE": str(self.ledger)}
        if self.temporal is None:
            run_id = await start_and_kill(self.db, AGENTS_REF, agent, None, marker=marker, env=env)
            await self.engine.sweep()  # the dead process's run, recovered here (its owner is gone)
            return self.engine, run_id
        queue = f"{self.queue}-kill"  # a queue no worker of this process polls yet
        table = {"address": self.temporal.address, "task_queue": queue, "heartbeat": HEARTBEAT}
        child = WorkerProcess(
            self.store, table, env={**env, "HANG_MARKER": str(marker), "TEST_WORKER_AGENTS": AGENTS_REF}
        )
        self.workers.append(child.start())
        watcher = self.open(worker=True, queue=queue)
        run = await watcher.start(agent, None)
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert time.monotonic() < deadline, "the worker process never reached the marker"
            await asyncio.sleep(0.02)
        child.stop(signal.SIGKILL)
        watcher.start_background()  # this process's worker takes the run over
        return watcher, run.id

    async def close(self) -> None:
        for worker in self.workers:
            worker.stop(signal.SIGKILL)
        for engine in self.engines:
            await engine.aclose()


@pytest.fixture(params=ENGINES)
async def unit(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Subject]:
    temporal = request.getfixturevalue("temporal_server") if request.param == "temporal" else None
    monkeypatch.setenv("LEDGER_FILE", str(tmp_path / "ledger.txt"))
    subject = Subject(request.param, tmp_path, temporal)
    try:
        yield subject
    finally:
        await subject.close()


async def finished(engine: RunEngine, run_id: str, within: float = 60) -> RunRecord:
    """The run once it has ended, wherever it executes."""
    deadline = time.monotonic() + within
    while True:
        record = await engine.get(run_id)
        if record.finished:
            return record
        assert time.monotonic() < deadline, f"run {run_id} is still {record.status.value} after {within} s"
        await asyncio.sleep(0.05)


async def test_a_run_parks_at_its_interrupt_and_one_answer_completes_it(unit: Subject) -> None:
    parked = await unit.engine.start("refund", "o-1", wait=True)
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None
    assert parked.interrupt.name == "approve" and parked.interrupt.payload == "o-1"
    done = await unit.engine.resume(parked.id, True, wait=True)
    assert done.status == RunStatus.completed and done.output == "refunded"
    assert len(unit.lines("load")) == 1 and len(unit.lines("charge")) == 1
    events = [event.to_dict() for event in await unit.engine.events(parked.id)]
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    types = [event["type"] for event in events]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED" and types.count("RUN_INTERRUPTED") == 1


async def test_of_concurrent_resumes_through_two_servers_exactly_one_wins_and_charges_once(unit: Subject) -> None:
    parked = await unit.engine.start("refund", "o-2", wait=True)
    assert parked.status == RunStatus.interrupted
    other = unit.open(worker=False)  # a second server over the same store (and Temporal)
    answers = [(unit.engine, other)[i % 2].resume(parked.id, True) for i in range(20)]
    outcomes = await asyncio.gather(*answers, return_exceptions=True)
    won = [outcome for outcome in outcomes if isinstance(outcome, RunRecord)]
    lost = [outcome for outcome in outcomes if not isinstance(outcome, RunRecord)]
    assert len(won) == 1, outcomes
    assert all(isinstance(outcome, RunConflict) for outcome in lost), lost
    done = await finished(unit.engine, parked.id)
    assert done.status == RunStatus.completed and done.output == "refunded"
    await asyncio.sleep(0.5)  # a second execution's charge would land now
    assert len(unit.lines("charge")) == 1


async def test_a_sleeping_run_is_woken_when_its_time_comes_and_repeats_nothing(unit: Subject) -> None:
    began = time.monotonic()
    asleep = await unit.engine.start("nap", 1.0, wait=True)
    assert asleep.status == RunStatus.sleeping and unit.lines("after") == []
    done = await finished(unit.engine, asleep.id)
    assert done.status == RunStatus.completed and done.output == "rested"
    assert time.monotonic() - began >= 1.0
    assert len(unit.lines("before")) == 1 and len(unit.lines("after")) == 1


async def test_a_cancelled_parked_run_and_a_cancelled_sleeping_run_never_go_on(unit: Subject) -> None:
    parked = await unit.engine.start("refund", "o-3", wait=True)
    asleep = await unit.engine.start("nap", 1.0, wait=True)
    assert parked.status == RunStatus.interrupted and asleep.status == RunStatus.sleeping
    for run in (parked, asleep):
        cancelled = await unit.engine.cancel(run.id)
        assert cancelled.status == RunStatus.cancelled
    with pytest.raises(RunConflict):
        await unit.engine.resume(parked.id, True)
    with pytest.raises(RunConflict):
        await unit.engine.cancel(asleep.id)
    await asyncio.sleep(2.0)  # past the sleep's end: nothing wakes it
    for run in (parked, asleep):
        assert (await unit.engine.get(run.id)).status == RunStatus.cancelled
    assert unit.lines("after") == [] and unit.lines("charge") == []
    types = [event.to_dict()["type"] for event in await unit.engine.events(asleep.id)]
    assert types[-1] == "RUN_CANCELLED" and types.count("RUN_CANCELLED") == 1


async def test_an_sse_reader_that_reconnects_with_last_event_id_misses_and_repeats_no_event(unit: Subject) -> None:
    app = create_agent_unit(engine=unit.engine)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit", timeout=60) as http:
        started = await http.post("/agents/chatty/runs", json={"input": 4})
        assert started.status_code == 202, started.text
        run_id = started.json()["id"]
        first = sse((await http.get(f"/runs/{run_id}/events")).text)  # until the run parks
        assert first[-1]["type"] == "RUN_INTERRUPTED"
        resumed = await http.post(f"/runs/{run_id}/resume", json={"answer": True})
        assert resumed.status_code in (200, 202), resumed.text
        rest = sse((await http.get(f"/runs/{run_id}/events", headers={"last-event-id": str(first[-1]["seq"])})).text)
        assert rest[-1]["type"] == "RUN_FINISHED"
        whole = first + rest
        assert [event["seq"] for event in whole] == list(range(1, len(whole) + 1))
        middle = first[len(first) // 2]["seq"]
        again = sse((await http.get(f"/runs/{run_id}/events", headers={"last-event-id": str(middle)})).text)
        assert again == whole[middle:]
    ticks = [event["value"] for event in whole if event.get("name") in ("tick", "tock")]
    assert ticks == [0, 1, 2, 3, 0, 1, 2, 3]


async def test_a_step_that_finished_before_its_executor_was_killed_never_runs_again(unit: Subject) -> None:
    watcher, run_id = await unit.kill_mid_step("crashable")
    done = await finished(watcher, run_id, within=90)
    assert done.status == RunStatus.completed and done.output == "done", done.error
    assert done.attempt == 2
    assert len(unit.lines("one")) == 1  # finished before the kill: never again
    assert len(unit.lines("two-start")) == 2 and len(unit.lines("two-end")) == 1  # cut: once more
    assert len(unit.lines("three")) == 1


async def test_an_interrupt_deadline_passes_unanswered_and_the_run_goes_on_with_its_default(unit: Subject) -> None:
    parked = await unit.engine.start("deadline", 1.0, wait=True)
    assert parked.status == RunStatus.interrupted
    assert parked.interrupt is not None and parked.interrupt.expires_at is not None
    done = await finished(unit.engine, parked.id, within=30)
    assert done.status == RunStatus.completed and done.output == "expired"
    assert [(answer.interrupt, answer.expired) for answer in done.answers] == [("approve", True)]
    assert unit.lines("after") == [f"after {parked.id} False"]
    events = [event.to_dict() for event in await unit.engine.events(parked.id)]
    expired = [event for event in events if event.get("name") == "agent-unit.interrupt-expired"]
    assert len(expired) == 1 and expired[0]["value"]["key"] == parked.interrupt.key
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    with pytest.raises(InterruptExpired):  # the answer that comes after: 409, saying why
        await unit.engine.resume(parked.id, True)
    app = create_agent_unit(engine=unit.engine)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        late = await http.post(f"/runs/{parked.id}/resume", json={"answer": True})
    assert late.status_code == 409 and late.json()["error"]["code"] == "interrupt_expired", late.text


async def test_an_interrupt_deadline_with_no_default_raises_where_the_agent_waits(unit: Subject) -> None:
    parked = await unit.engine.start("strict", 1.0, wait=True)
    assert parked.status == RunStatus.interrupted
    done = await finished(unit.engine, parked.id, within=30)
    assert done.status == RunStatus.completed and done.output == "expired"


async def test_an_answer_before_the_deadline_wins_and_the_deadline_never_fires(unit: Subject) -> None:
    parked = await unit.engine.start("deadline", 1.5, wait=True)
    done = await unit.engine.resume(parked.id, True, wait=True)
    assert done.status == RunStatus.completed and done.output == "approved"
    await asyncio.sleep(2.0)  # past the deadline
    again = await unit.engine.get(parked.id)
    assert again.version == done.version and [answer.expired for answer in again.answers] == [False]
    assert unit.lines("after") == [f"after {parked.id} True"]


async def test_a_tool_approval_nobody_answers_within_approval_timeout_is_declined(unit: Subject) -> None:
    from ..support import pydantic_ai_fixtures as fixtures

    fixtures.LOG.clear()
    store = f"sqlite:///{unit.tmp_path / 'approvals.db'}"
    engine = unit.open(
        worker=True, queue=f"{unit.queue}-approvals", agents=fixtures.AGENTS, store=store, approval_timeout="1s"
    )
    engine.start_background()
    parked = await engine.start("support", "refund my order", wait=True)
    assert parked.interrupt is not None and parked.interrupt.name == "tool-approval"
    assert parked.interrupt.expires_at is not None
    done = await finished(engine, parked.id, within=30)
    assert done.status == RunStatus.completed and done.output == "done: nobody answered by the deadline"
    assert not any(line.startswith("refund") for line in fixtures.LOG)  # the tool was not called
    assert [answer.expired for answer in done.answers] == [True]


@pytest.fixture
def buggy() -> Iterator[None]:
    engine_agents.BUGGY[0] = True
    yield
    engine_agents.BUGGY[0] = True


async def test_a_failed_run_retried_after_the_fix_completes_without_repeating_its_finished_steps(
    unit: Subject, buggy: None
) -> None:
    failed = await unit.engine.start("flaky", None, wait=True)
    assert failed.status == RunStatus.failed and failed.error is not None
    engine_agents.BUGGY[0] = False  # the fix is deployed
    done = await unit.engine.retry(failed.id, wait=True)
    assert done.status == RunStatus.completed and done.output == "charged", done.error
    assert done.attempt == 2
    assert len(unit.lines("load")) == 1 and len(unit.lines("charge")) == 2  # only the failed step again
    events = [event.to_dict() for event in await unit.engine.events(failed.id)]
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    assert [event["type"] for event in events].count("RUN_FINISHED") == 1


async def test_of_two_concurrent_retries_through_two_servers_exactly_one_wins(unit: Subject, buggy: None) -> None:
    failed = await unit.engine.start("flaky", None, wait=True)
    assert failed.status == RunStatus.failed
    engine_agents.BUGGY[0] = False
    other = unit.open(worker=False)
    outcomes = await asyncio.gather(
        unit.engine.retry(failed.id), other.retry(failed.id), unit.engine.retry(failed.id), return_exceptions=True
    )
    won = [outcome for outcome in outcomes if isinstance(outcome, RunRecord)]
    lost = [outcome for outcome in outcomes if not isinstance(outcome, RunRecord)]
    assert len(won) == 1, outcomes
    assert all(isinstance(outcome, RunConflict) for outcome in lost), lost
    done = await finished(unit.engine, failed.id)
    assert done.status == RunStatus.completed and done.attempt == 2
    await asyncio.sleep(0.5)  # a second retry's execution would charge now
    assert len(unit.lines("charge")) == 2
    with pytest.raises(NotFailed):  # and the finished run is retried no more
        await other.retry(failed.id)


async def test_a_finished_run_is_deleted_once_its_retention_passes_and_a_parked_one_is_kept(unit: Subject) -> None:
    # 3 s: a resume that waits reads the finished run back, which on a loaded machine (CI's six
    # workers beside Temporal) came more than 1 s after the finish, and found it deleted already.
    engine = unit.open(worker=True, queue=f"{unit.queue}-retention", retention="3s", sweep_interval="0.2s")
    engine.start_background()
    parked = await engine.start("refund", "o-4", wait=True)
    done = await engine.start("refund", "o-5", wait=True)
    done = await engine.resume(done.id, False, wait=True)
    assert done.status == RunStatus.completed and done.output == "declined" and done.finished_at is not None
    ended = time.monotonic()
    while await engine.find(done.id) is not None:
        assert time.monotonic() < ended + 30, "the finished run was never deleted"
        await asyncio.sleep(0.1)
    # Not at once: after its retention, counted from when it finished (the record's clock). Not from
    # when resume returned: on a busy machine that can come most of a second after the finish.
    assert datetime.now(UTC) - done.finished_at >= timedelta(seconds=3)
    assert await engine.events(done.id) == []
    assert (await engine.get(parked.id)).status == RunStatus.interrupted  # a parked run is kept
