"""A server that starts recovers a crashed server's runs as soon as their leases lapse, and says so."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_unit import Run, RunEngine, RunRecord, RunStatus, define_agent
from agent_unit.stores.memory import MemoryStore
from agent_unit.stores.sqlite import SQLiteStore

from ..support import fetch
from ..support.server import ROOT, Server, free_port, wait_until_up

# A server whose agent_unit logger writes INFO lines to stderr, as a deployment configures it.
LOGGING_SERVER = """
import logging, sys, uvicorn
logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
uvicorn.run("tests.support.server_app:app", port=int(sys.argv[1]), log_level="warning")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_server_that_starts_recovers_a_crashed_run_without_waiting_for_the_sweep_interval(
    tmp_path: Path,
) -> None:
    db, effects, marker, log = tmp_path / "runs.db", tmp_path / "effects.txt", tmp_path / "marker", tmp_path / "log"
    env = {
        "TEST_AGENTS": "tests.support.process_agents:AGENTS",
        "EFFECTS_FILE": str(effects),
        "HANG_MARKER": str(marker),
    }
    # The first server holds its runs' leases for 10 s and hangs in step two; it is killed there. Its
    # leases name a process of another machine, so the second cannot see it end: only its leases lapse.
    first_options = json.dumps({"lease_ttl": "10s", "owner": "another-machine:7:1:1:first"})
    first = Server(f"sqlite:///{db}", env={**env, "HANG_IN_STEP_TWO": "1", "TEST_OPTIONS": first_options}).start()
    try:
        started = fetch.post(f"{first.url}/agents/crashable/runs", json={"input": None}).json()
        while not marker.exists():
            time.sleep(0.02)
    finally:
        first.stop(signal.SIGKILL)

    # The second server sweeps only once an hour: only the sweep at its start can recover the run.
    port = free_port()
    options = json.dumps({"sweep_interval": "1h", "lease_ttl": "10s", "keepalive_seconds": 0.5})
    environment = {
        **os.environ,
        **env,
        "PYTHONPATH": str(ROOT),
        "TEST_STORE": f"sqlite:///{db}",
        "TEST_OPTIONS": options,
    }
    with log.open("w") as stderr:
        second = subprocess.Popen([sys.executable, "-c", LOGGING_SERVER, str(port)], env=environment, stderr=stderr)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url)
        deadline = time.monotonic() + 120
        while (record := fetch.get(f"{url}/runs/{started['id']}").json())["status"] != "completed":
            assert time.monotonic() < deadline, f"the run was not recovered: {record}"
            time.sleep(0.1)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=20)

    assert record["attempt"] == 2 and record["output"] == "charged"
    assert f"agent_unit INFO recovered run {started['id']} of agent 'crashable': its lease lapsed" in log.read_text()
    events = asyncio.run(_events(db, started["id"]))
    starts = [event for event in events if event["type"] == "RUN_STARTED"]
    assert [start["metadata"]["agent-unit"]["attempt"] for start in starts] == [1, 2]
    assert [event["type"] for event in events][-2:] == ["STEP_FINISHED", "RUN_FINISHED"]


async def _events(db: Path, run_id: str) -> list[dict[str, Any]]:
    store = SQLiteStore(db)
    try:
        return [event.to_dict() for event in await store.read_events(run_id)]
    finally:
        await store.close()


async def test_the_sweep_at_start_arms_a_timer_for_a_lease_held_by_a_dead_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recovered = asyncio.Event()

    @define_agent
    async def agent(input: None, run: Run) -> str:
        recovered.set()
        return await run.step("one", lambda: "done")

    store = MemoryStore()
    now = time.time()
    moment = datetime.fromtimestamp(now, UTC)
    dead = RunRecord(
        id="run_dead",
        agent="a",
        thread_id="thread_dead",
        status=RunStatus.running,
        created_at=moment,
        updated_at=moment,
        version=1,
        lease_owner="dead-host:1:x/c",
        lease_expires=now + 1,
        due_at=now + 1,
    )
    await store.create_run(dead, events=['{"type":"RUN_STARTED"}'])
    engine = RunEngine({"a": agent}, store, sweep_interval="1h")
    caplog.set_level(logging.INFO, logger="agent_unit")
    try:
        engine.start_background()  # as a server's lifespan does: one sweep now, the next in an hour
        await asyncio.wait_for(recovered.wait(), 30)  # not an hour: at the lapse of the dead lease
        record = await engine.wait("run_dead")
    finally:
        await engine.aclose()
    assert record.attempt == 2 and record.output == "done"
    assert "recovered run run_dead of agent 'a': its lease lapsed" in caplog.text
    events = [event.to_dict() for event in await store.read_events("run_dead")]
    assert [event["type"] for event in events] == [
        "RUN_STARTED",
        "RUN_STARTED",
        "STEP_STARTED",
        "STEP_FINISHED",
        "RUN_FINISHED",
    ]
    assert events[1]["metadata"] == {"agent-unit": {"attempt": 2}}


@pytest.mark.skipif(not Path("/proc/self/ns/pid").exists(), reason="the OS does not show whether a process ended")
def test_a_server_restarted_after_kill_9_recovers_its_runs_at_once_not_when_their_leases_lapse(
    tmp_path: Path,
) -> None:
    db, effects, marker = tmp_path / "runs.db", tmp_path / "effects.txt", tmp_path / "marker"
    env = {
        "TEST_AGENTS": "tests.support.process_agents:AGENTS",
        "EFFECTS_FILE": str(effects),
        "HANG_MARKER": str(marker),
    }
    # The default lease (30 s) and a sweep once an hour: neither can explain a recovery in seconds.
    options = {"TEST_OPTIONS": json.dumps({"sweep_interval": "1h"})}
    first = Server(f"sqlite:///{db}", env={**env, **options, "HANG_IN_STEP_TWO": "1"}).start()
    try:
        run_id = fetch.post(f"{first.url}/agents/crashable/runs", json={"input": None}).json()["id"]
        while not marker.exists():
            time.sleep(0.02)
    finally:
        first.stop(signal.SIGKILL)

    second = Server(f"sqlite:///{db}", env={**env, **options}).start()
    try:
        up = time.monotonic()
        while (record := fetch.get(f"{second.url}/runs/{run_id}").json())["status"] != "completed":
            assert time.monotonic() - up < 10, f"not recovered at start (the lease lapses after 30 s): {record}"
            time.sleep(0.05)
    finally:
        second.stop()
    assert record["attempt"] == 2 and record["output"] == "charged"
    lines = effects.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["one", "two-start", "two-start", "two-done"]  # step one once
