"""The default runtime over D1 (``storage = "d1://DB"``) in real workerd: the local D1 of ``wrangler dev``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from agent_unit.client import SyncAgentClient

from ...support import fetch
from .conftest import eventually, served
from .dev import WranglerDev
from .ledger import Ledger

# one `wrangler dev` for the module: `make test` keeps a module in one worker process (`--dist loadscope`)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, ledger: Ledger) -> Iterator[WranglerDev]:
    with served("d1", tmp_path_factory, {"LEDGER_URL": ledger.url}, refund=True) as dev:
        yield dev


def test_a_refund_on_d1_parks_survives_a_restart_of_wrangler_dev_and_charges_exactly_once(
    worker: WranglerDev, ledger: Ledger
) -> None:
    with SyncAgentClient(worker.url, timeout=120) as client:
        events = list(client.run("refund", {"order_id": "d1"}))
        assert events[-1].type == "RUN_INTERRUPTED", events
        run_id = events[-1].data["runId"]
    worker.restart()  # the same local D1 database
    with SyncAgentClient(worker.url, timeout=120) as client:
        assert client.get(run_id).status == "interrupted"
        finished = list(client.resume(run_id, {"approved": True}))
        assert finished[-1].type == "RUN_FINISHED" and finished[-1].data["result"] == "refunded"
        assert client.get(run_id).status == "completed"
    assert [call["order_id"] for call in ledger.made("/charge")] == ["d1"]
    assert "Uncaught" not in worker.log, worker.log[-3000:]


def test_the_cron_triggers_sweep_wakes_a_sleeping_run_on_d1(worker: WranglerDev, ledger: Ledger) -> None:
    with SyncAgentClient(worker.url, timeout=120) as client:
        started = client.start("sleeper", "d1-cat", wait=True)
        assert started.status == "sleeping"
        cron = worker.config["triggers"]["crons"][0]
        with fetch.Client(base_url=worker.url, timeout=120) as http:

            def swept() -> bool:
                http.get("/cdn-cgi/local/scheduled", params={"cron": cron})
                return client.get(started.id).status == "completed"

            eventually(swept, seconds=60)
    assert [call["name"] for call in ledger.made("/woke")] == ["d1-cat"]


def test_a_run_started_with_a_202_on_d1_finishes_after_the_response_held_by_wait_until(
    worker: WranglerDev, ledger: Ledger
) -> None:
    with SyncAgentClient(worker.url, timeout=120) as client:
        started = client.start("slow", "d1-later")  # 202: the run goes on after the response
        assert started.status in ("queued", "running")

        def finished() -> bool:
            time.sleep(1)  # few requests: a request in flight must not be what keeps the run going
            return client.get(started.id).status == "completed"

        eventually(finished, seconds=30)
    assert [call["name"] for call in ledger.made("/after")] == ["d1-later"]
    assert "Uncaught" not in worker.log, worker.log[-3000:]


def test_a_run_past_its_budget_on_d1_continues_in_a_fresh_invocation_at_the_workers_own_url(
    worker: WranglerDev, ledger: Ledger
) -> None:
    before = worker.log.count("/__agent-unit/continue")
    with SyncAgentClient(worker.url, timeout=120) as client:
        started = client.start("long", "d1-long")  # four steps of 1.2 s: past the 3 s budget
        eventually(lambda: client.get(started.id).status == "completed", seconds=90)
        done = client.get(started.id)
        events = list(client.events(started.id))
    assert done.output == 4 and events[-1].type == "RUN_FINISHED"
    assert sorted(call["index"] for call in ledger.made("/long") if call["name"] == "d1-long") == [0, 1, 2, 3]
    # no Cron Trigger fired: each yield was continued by a request to the Worker's own URL
    assert worker.log.count("/__agent-unit/continue") > before, worker.log[-3000:]
    assert "Uncaught" not in worker.log, worker.log[-3000:]


def test_mcp_answers_501_in_workerd_saying_why_and_where_it_runs(worker: WranglerDev) -> None:
    with worker.client() as http:
        answered = http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"accept": "application/json, text/event-stream"},
        )
    assert answered.status_code == 501, answered.text
    message = answered.json()["error"]["message"]
    assert "Cloudflare Workers" in message and "rpds-py" in message and "another preset" in message
