"""The cloudflare preset's Durable Objects runtime in real workerd (``wrangler dev``), not a simulation."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

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
    with served("durable", tmp_path_factory, {"LEDGER_URL": ledger.url}, refund=True) as dev:
        yield dev


def test_a_refund_parks_survives_a_restart_of_wrangler_dev_and_charges_exactly_once(
    worker: WranglerDev, ledger: Ledger
) -> None:
    with SyncAgentClient(worker.url, timeout=120) as client:
        events = list(client.run("refund", {"order_id": "o-1"}))
        assert events[-1].type == "RUN_INTERRUPTED", events
        run_id = events[-1].data["runId"]
    worker.restart()  # the same local state: the run's Durable Object outlives the process
    with SyncAgentClient(worker.url, timeout=120) as client:
        assert client.get(run_id).status == "interrupted"
        finished = list(client.resume(run_id, {"approved": True}))
        assert finished[-1].type == "RUN_FINISHED" and finished[-1].data["result"] == "refunded"
        assert client.get(run_id).status == "completed"
    charges = ledger.made("/charge")
    assert len(charges) == 1 and charges[0]["order_id"] == "o-1", ledger.calls
    with fetch.Client(base_url=worker.url, timeout=60) as http:
        again = http.post(f"/runs/{run_id}/resume", json={"answer": {"approved": True}})
        assert again.status_code == 409, again.text
    assert len(ledger.made("/charge")) == 1
    assert "Uncaught" not in worker.log, worker.log[-3000:]


def test_a_sleeping_run_is_woken_by_its_durable_object_alarm(worker: WranglerDev, ledger: Ledger) -> None:
    with SyncAgentClient(worker.url, timeout=120) as client:
        started = client.start("sleeper", "cat", wait=True)
        assert started.status == "sleeping"
        eventually(lambda: client.get(started.id).status == "completed")
        assert client.get(started.id).output == "rested cat"
    assert [call["name"] for call in ledger.made("/woke")].count("cat") == 1


def test_a_run_past_its_budget_yields_and_its_alarm_continues_it_with_no_step_repeated(
    worker: WranglerDev, ledger: Ledger
) -> None:
    with SyncAgentClient(worker.url, timeout=120) as client:
        started = client.start("long", "l1")
        eventually(lambda: client.get(started.id).status == "completed", seconds=60)
        assert client.get(started.id).output == 4
        events = list(client.events(started.id))
    assert sorted(call["index"] for call in ledger.made("/long") if call["name"] == "l1") == [0, 1, 2, 3]
    assert events[-1].type == "RUN_FINISHED"


def test_sse_resumes_after_last_event_id_with_only_the_later_events(worker: WranglerDev) -> None:
    with SyncAgentClient(worker.url, timeout=120) as client:
        events = list(client.run("refund", {"order_id": "sse"}))
    run_id = events[-1].data["runId"]
    middle = events[len(events) // 2].seq
    with fetch.Client(base_url=worker.url, timeout=60) as http:
        again = http.get(
            f"/runs/{run_id}/events", headers={"accept": "text/event-stream", "last-event-id": str(middle)}
        )
    ids = [int(line[3:].strip()) for line in again.text.splitlines() if line.startswith("id:")]
    assert ids == [event.seq for event in events if event.seq > middle], again.text


def test_the_run_list_the_inbox_reads_shows_parked_runs(worker: WranglerDev) -> None:
    with SyncAgentClient(worker.url, timeout=120) as client:
        parked = client.start("refund", {"order_id": "inbox"}, wait=True)
        assert parked.status == "interrupted"
        listed = client.list(status="interrupted")
    assert parked.id in [run.id for run in listed.runs]


def test_a2a_and_ag_ui_each_start_a_run_through_one_request(worker: WranglerDev) -> None:
    with fetch.Client(base_url=worker.url, timeout=120) as http:
        message = {"messageId": "m-a2a", "role": "ROLE_USER", "parts": [{"data": {"order_id": "a2a"}}]}
        message["metadata"] = {"skill": "refund"}
        a2a = http.post(
            "/a2a", json={"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": message}}
        )
        assert a2a.json()["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", a2a.text

        body = {"threadId": "t-agui", "runId": "r-agui", "state": {}, "tools": [], "context": []}
        body["messages"] = [{"id": "m1", "role": "user", "content": '{"order_id": "agui"}'}]
        agui = http.post("/agents/refund/ag-ui", json=body, headers={"accept": "text/event-stream"})
        data = [line.removeprefix("data:").strip() for line in agui.text.splitlines() if line.startswith("data:")]
        assert '"RUN_FINISHED"' in data[-1] and "interrupts" in data[-1], agui.text
    assert "Uncaught" not in worker.log, worker.log[-3000:]


def test_a_cron_triggers_task_runs_once_for_a_tick_delivered_twice(worker: WranglerDev, ledger: Ledger) -> None:
    tick = "/cdn-cgi/local/scheduled?cron=0+8+*+*+*&time=1796112000000"
    with fetch.Client(base_url=worker.url, timeout=60) as http:
        for _ in range(2):
            assert http.get(tick).status_code == 200
    eventually(lambda: len(ledger.made("/digest")) >= 1)
    assert ledger.made("/digest") == [{"path": "/digest", "name": "digest", "at": "2026-12-01T08:00:00+00:00"}]


def test_the_cold_start_of_the_worker_and_of_a_run_object_is_measured(
    worker: WranglerDev, record_property: Callable[[str, object], None]
) -> None:
    began = time.monotonic()
    with fetch.Client(base_url=worker.url, timeout=120) as http:  # a new run: a new Durable Object's first request
        assert http.post("/agents/refund/runs?wait=1", json={"input": {"order_id": "cold"}}).status_code == 200
    first_object = time.monotonic() - began
    record_property("worker_first_request_seconds", [round(seconds, 2) for seconds in worker.cold_start])
    record_property("run_object_first_request_seconds", round(first_object, 2))
    print(f"\ncold start: worker {worker.cold_start} s, a new run object {first_object:.2f} s")
    assert max(worker.cold_start) < 120 and first_object < 15


def test_an_alarm_that_is_a_fresh_isolates_first_event_reads_the_workers_secrets(
    worker: WranglerDev, ledger: Ledger
) -> None:
    with SyncAgentClient(worker.url, timeout=120) as client:
        started = client.start("sleeper", "fresh", wait=True)
        assert started.status == "sleeping"
    worker.stop()
    time.sleep(2.5)  # the run is due before workerd is back: its alarm fires as the isolate starts
    worker.start(probe=False)  # no request: the alarm is the new isolate's first event
    # the woken step reads LEDGER_URL, a secret in .dev.vars, through agent_unit.env
    eventually(lambda: "fresh" in [call["name"] for call in ledger.made("/woke")], seconds=90)
    worker.probe()
    with SyncAgentClient(worker.url, timeout=120) as client:
        done = client.get(started.id)
    assert (done.status, done.output) == ("completed", "rested fresh")
    assert "Uncaught" not in worker.log, worker.log[-3000:]


def test_a_run_whose_workerd_is_killed_mid_step_is_recovered_by_its_alarm_with_no_completed_step_repeated(
    worker: WranglerDev, ledger: Ledger
) -> None:
    with SyncAgentClient(worker.url, timeout=120) as client:
        started = client.start("crash", "k1")
    try:
        eventually(lambda: "k1" in [call["name"] for call in ledger.made("/crash-slow")], seconds=60)
    except AssertionError:
        raise AssertionError(f"{ledger.calls}\n{worker.log[-6000:]}") from None
    worker.kill()  # SIGKILL mid-step: the step "slow" never finishes in this process
    worker.start()
    with SyncAgentClient(worker.url, timeout=120) as client:
        # the alarm sits at the lease's expiry (30 s after the claim): it recovers the run then
        eventually(lambda: client.get(started.id).status == "completed", seconds=120)
        done = client.get(started.id)
    assert (done.output, done.attempt) == ("done", 2)
    assert [call["name"] for call in ledger.made("/crash-charge")].count("k1") == 1  # the completed step
    assert [call["name"] for call in ledger.made("/crash-slow")].count("k1") == 2  # the one cut, run again
