"""Runs on Temporal (``[temporal]``): the same agents and HTTP API, each run a Temporal workflow.

Everything here is real: a Temporal dev server (``temporal server start-dev``), uvicorn processes
serving the HTTP API, worker processes executing the agents, SQLite or PostgreSQL as the store.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..support import fetch
from ..support.server import Server
from ..support.temporal import TemporalServer, WorkerProcess

pytestmark = pytest.mark.slow

AGENTS = "tests.support.temporal_agents:AGENTS"
HEARTBEAT = "2s"


@pytest.fixture
def temporal(temporal_server: TemporalServer) -> TemporalServer:
    return temporal_server


class Deployment:
    """HTTP servers and workers of one task queue over one Temporal and one store; all stopped at the end."""

    def __init__(self, temporal: TemporalServer, store: str, tmp_path: Path, name: str) -> None:
        self.temporal = temporal
        self.store = store
        self.ledger = tmp_path / "ledger.txt"
        self.ledger.touch()
        self.table = {
            "address": temporal.address,
            "task_queue": f"q-{name}",
            "heartbeat": HEARTBEAT,
            "search_attributes": True,
        }
        self.env = {"LEDGER_FILE": str(self.ledger)}
        self.servers: list[Server] = []
        self.workers: list[WorkerProcess] = []

    def server(self) -> Server:
        options = {"keepalive_seconds": 0.5, "temporal": self.table, "temporal_worker": False}
        env = {**self.env, "TEST_AGENTS": AGENTS, "TEST_OPTIONS": json.dumps(options)}
        server = Server(self.store, env=env).start()
        self.servers.append(server)
        return server

    def worker(self) -> WorkerProcess:
        worker = WorkerProcess(self.store, self.table, env=self.env).start()
        self.workers.append(worker)
        return worker

    def lines(self, prefix: str = "") -> list[str]:
        return [line for line in self.ledger.read_text().splitlines() if line.startswith(prefix)]

    def describe(self, run_id: str) -> dict[str, Any]:
        return json.loads(self.temporal.run("workflow", "describe", "--workflow-id", run_id, "--output", "json"))  # type: ignore[no-any-return]

    def listed(self, query: str) -> list[str]:
        """The workflow ids ``temporal workflow list --query`` shows (its visibility lags a little)."""
        shown = self.temporal.run("workflow", "list", "--query", query, "--output", "json")
        return [row["execution"]["workflowId"] for row in json.loads(shown or "[]")]

    def stop(self) -> None:
        for process in [*self.servers, *self.workers]:
            process.stop(signal.SIGKILL)


@pytest.fixture
def deploy(
    temporal: TemporalServer, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[str], Deployment]]:
    made: list[Deployment] = []

    def make(store: str) -> Deployment:
        deployment = Deployment(temporal, store, tmp_path, request.node.name[:40])
        made.append(deployment)
        return deployment

    yield make
    for deployment in made:
        deployment.stop()


def until(check: Callable[[], Any], timeout: float = 60, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


def run_of(url: str, run_id: str) -> dict[str, Any]:
    return fetch.get(f"{url}/runs/{run_id}", timeout=10).json()  # type: ignore[no-any-return]


def status_is(url: str, run_id: str, *statuses: str) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        run = run_of(url, run_id)
        return run if run["status"] in statuses else None

    return check


def execution_status(description: dict[str, Any]) -> str:
    return str(description["workflowExecutionInfo"]["status"])


def test_the_refund_flow_over_http_is_one_temporal_workflow_named_by_the_run_id(
    deploy: Callable[[str], Deployment], tmp_path: Path
) -> None:
    app = deploy(f"sqlite:///{tmp_path / 'runs.db'}")
    server = app.server()
    app.worker()
    started = fetch.post(f"{server.url}/agents/refund/runs?wait=1", json={"input": {"order_id": "o-1"}}, timeout=60)
    run = started.json()
    assert run["status"] == "interrupted", run
    described = app.describe(run["id"])
    assert described["workflowExecutionInfo"]["type"]["name"] == "agent-unit.run"
    assert execution_status(described) == "WORKFLOW_EXECUTION_STATUS_RUNNING"
    waiting = (
        f"AgentUnitStatus = 'interrupted' AND AgentUnitAgent = 'refund' AND AgentUnitThread = '{run['thread_id']}'"
    )
    until(lambda: app.listed(waiting) == [run["id"]], what="the run listed as interrupted in Temporal")

    refused = fetch.post(f"{server.url}/runs/{run['id']}/resume", json={"answer": {"approved": "maybe"}}, timeout=30)
    assert refused.status_code == 422, refused.text
    assert run_of(server.url, run["id"])["status"] == "interrupted"  # a bad answer leaves it parked

    resumed = fetch.post(
        f"{server.url}/runs/{run['id']}/resume?wait=1", json={"answer": {"approved": True}}, timeout=60
    )
    assert resumed.status_code in (200, 202), resumed.text
    done = until(status_is(server.url, run["id"], "completed"), what="the run's completion")
    assert done["output"] == "refunded"
    assert until(lambda: execution_status(app.describe(run["id"])) == "WORKFLOW_EXECUTION_STATUS_COMPLETED")
    completed = f"AgentUnitStatus = 'completed' AND AgentUnitThread = '{run['thread_id']}'"
    until(lambda: app.listed(completed) == [run["id"]], what="the run listed as completed in Temporal")
    assert len(app.lines("charge")) == 1
    events = fetch.get(f"{server.url}/runs/{run['id']}/events?after=0", timeout=30).text
    seqs = [int(line[4:]) for line in events.splitlines() if line.startswith("id: ")]
    assert seqs == list(range(1, len(seqs) + 1))  # contiguous, as SSE readers need


def test_a_worker_killed_mid_step_is_replaced_by_another_that_repeats_no_finished_step(
    deploy: Callable[[str], Deployment], tmp_path: Path
) -> None:
    app = deploy(f"sqlite:///{tmp_path / 'runs.db'}")
    server = app.server()
    first, second = app.worker(), app.worker()
    run = fetch.post(f"{server.url}/agents/slow/runs", json={"input": 60}, timeout=30).json()
    started = until(lambda: app.lines("start two"), what="step two's start")
    pid = int(started[0].split()[-1])
    assert pid in (first.pid, second.pid)
    survivor = second.pid if pid == first.pid else first.pid
    (first if pid == first.pid else second).stop(signal.SIGKILL)

    done = until(status_is(server.url, run["id"], "completed", "failed"), timeout=90, what="the run's end")
    assert done["status"] == "completed", done
    assert done["output"] == "one+two+three"
    assert done["attempt"] == 2
    assert len(app.lines("start one")) == 1 and len(app.lines("end one")) == 1  # finished: never again
    assert len(app.lines("start two")) == 2 and len(app.lines("end two")) == 1  # cut: once more
    assert len(app.lines("start three")) == 1
    assert [line.split()[-1] for line in app.lines("end t")] == [str(survivor)] * 2  # two, three: the survivor's


def test_fifty_concurrent_resumes_through_two_servers_and_two_workers_have_one_winner_and_one_effect(
    deploy: Callable[[str], Deployment], postgres_url: str
) -> None:
    app = deploy(postgres_url)
    servers = [app.server(), app.server()]
    app.worker(), app.worker()
    run = fetch.post(f"{servers[0].url}/agents/refund/runs?wait=1", json={"input": {"order_id": "o-50"}}, timeout=60)
    run_id = run.json()["id"]
    assert run.json()["status"] == "interrupted"

    async def burst() -> list[int]:
        async with fetch.AsyncClient(timeout=60) as client:
            answers = [
                client.post(f"{servers[i % 2].url}/runs/{run_id}/resume", json={"answer": {"approved": True}})
                for i in range(50)
            ]
            return [response.status_code for response in await asyncio.gather(*answers)]

    codes = asyncio.run(burst())
    assert codes.count(409) == 49, codes
    assert [code for code in codes if code != 409] in ([200], [202]), codes
    done = until(status_is(servers[1].url, run_id, "completed"), what="the run's completion")
    assert done["output"] == "refunded"
    time.sleep(1)  # a second effect would land now
    assert len(app.lines("charge")) == 1


def test_a_sleep_is_a_temporal_timer_that_wakes_the_run_after_every_process_restarted(
    deploy: Callable[[str], Deployment], tmp_path: Path, temporal: TemporalServer
) -> None:
    app = deploy(f"sqlite:///{tmp_path / 'runs.db'}")
    server = app.server()
    worker = app.worker()
    run = fetch.post(f"{server.url}/agents/nap/runs?wait=1", json={"input": 8}, timeout=60).json()
    assert run["status"] == "sleeping", run
    slept_at = time.monotonic()
    server.stop(signal.SIGKILL)
    worker.stop(signal.SIGKILL)
    temporal.stop()  # the timer is in Temporal's own database: it outlives the server too
    temporal.start()
    assert time.monotonic() - slept_at < 8, "restarting took the whole sleep: the test proves nothing"
    assert app.lines("after") == []
    app.worker()
    server = app.server()
    done = until(status_is(server.url, run["id"], "completed"), what="the wake-up")
    assert done["output"] == "rested"
    assert len(app.lines("before")) == 1 and len(app.lines("after")) == 1


def test_a_run_cancelled_in_agent_unit_or_in_temporal_ends_cancelled_in_both(
    deploy: Callable[[str], Deployment], tmp_path: Path
) -> None:
    app = deploy(f"sqlite:///{tmp_path / 'runs.db'}")
    server = app.server()
    app.worker()
    ours = fetch.post(f"{server.url}/agents/waits/runs?wait=1", json={"input": "a"}, timeout=60).json()
    theirs = fetch.post(f"{server.url}/agents/waits/runs?wait=1", json={"input": "b"}, timeout=60).json()
    assert ours["status"] == theirs["status"] == "interrupted"

    cancelled = fetch.post(f"{server.url}/runs/{ours['id']}/cancel", timeout=30)
    assert cancelled.status_code == 200, cancelled.text
    assert run_of(server.url, ours["id"])["status"] == "cancelled"
    app.temporal.run("workflow", "cancel", "--workflow-id", theirs["id"])
    until(status_is(server.url, theirs["id"], "cancelled"), what="the cancel from Temporal")

    for run_id in (ours["id"], theirs["id"]):
        until(lambda run_id=run_id: execution_status(app.describe(run_id)) == "WORKFLOW_EXECUTION_STATUS_CANCELED")
    for run in (ours, theirs):
        cancelled_query = f"AgentUnitStatus = 'cancelled' AND AgentUnitThread = '{run['thread_id']}'"
        until(lambda q=cancelled_query, i=run["id"]: app.listed(q) == [i], what="the run listed as cancelled")
    again = fetch.post(f"{server.url}/runs/{ours['id']}/cancel", timeout=30)
    assert again.status_code == 409
    late = fetch.post(f"{server.url}/runs/{theirs['id']}/resume", json={"answer": True}, timeout=30)
    assert late.status_code == 409
