"""A server that starts recovers a crashed server's runs as soon as their leases lapse, and says so."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_unit.stores.sqlite import SQLiteStore

from .server import ROOT, Server, free_port, wait_until_up

# A server whose agent_unit logger writes INFO lines to stderr, as a deployment configures it.
LOGGING_SERVER = """
import logging, sys, uvicorn
logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
uvicorn.run("tests.server_app:app", port=int(sys.argv[1]), log_level="warning")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_server_that_starts_recovers_a_crashed_run_without_waiting_for_the_sweep_interval(
    tmp_path: Path,
) -> None:
    db, effects, marker, log = tmp_path / "runs.db", tmp_path / "effects.txt", tmp_path / "marker", tmp_path / "log"
    env = {"TEST_AGENTS": "tests.process_agents:AGENTS", "EFFECTS_FILE": str(effects), "HANG_MARKER": str(marker)}
    # The first server holds its runs' leases for 10 s and hangs in step two; it is killed there.
    first = Server(
        f"sqlite:///{db}", env={**env, "HANG_IN_STEP_TWO": "1", "TEST_OPTIONS": json.dumps({"lease_ttl": "10s"})}
    ).start()
    try:
        started = httpx.post(f"{first.url}/agents/crashable/runs", json={"input": None}).json()
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
        while (record := httpx.get(f"{url}/runs/{started['id']}").json())["status"] != "completed":
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
