"""``agent-unit dev`` runs the app and a Temporal worker in one process; ``agent-unit worker`` runs a worker alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..support import fetch
from ..support.dev_process import DevProcess
from ..support.server import ROOT, Server
from ..support.temporal import TemporalServer

pytestmark = pytest.mark.slow

AGENT = "from tests.support.temporal_agents import refund as agent\n"


def project(tmp_path: Path, temporal: TemporalServer, queue: str) -> Path:
    root = tmp_path / "project"
    (root / "agents").mkdir(parents=True)
    (root / "agents" / "refund.py").write_text(AGENT)
    (root / "agent-unit.toml").write_text(
        f'storage = "sqlite:///{tmp_path / "runs.db"}"\n'
        f'[temporal]\naddress = "${{TEMPORAL_ADDRESS}}"\ntask_queue = "{queue}"\nheartbeat = "2s"\n'
    )
    return root


def refund_through(url: str) -> dict[str, object]:
    run = fetch.post(f"{url}/agents/refund/runs?wait=1", json={"input": {"order_id": "o-1"}}, timeout=60).json()
    assert run["status"] == "interrupted", run
    resumed = fetch.post(f"{url}/runs/{run['id']}/resume?wait=1", json={"answer": {"approved": True}}, timeout=60)
    assert resumed.status_code in (200, 202), resumed.text
    deadline = time.monotonic() + 60
    while (done := fetch.get(f"{url}/runs/{run['id']}", timeout=10).json())["status"] != "completed":
        assert time.monotonic() < deadline, done
        time.sleep(0.05)
    return done  # type: ignore[no-any-return]


def test_dev_serves_the_app_and_a_temporal_worker_in_one_process(
    tmp_path: Path, temporal_server: TemporalServer
) -> None:
    root = project(tmp_path, temporal_server, "dev-queue")
    dev = DevProcess(root, "--no-reload", env={"TEMPORAL_ADDRESS": temporal_server.address})
    try:
        dev.up()
        done = refund_through(dev.url)
        assert done["output"] == "refunded"
        described = json.loads(
            temporal_server.run("workflow", "describe", "--workflow-id", str(done["id"]), "--output", "json")
        )
        assert described["executionConfig"]["taskQueue"]["name"] == "dev-queue"
        run = fetch.post(f"{dev.url}/agents/refund/runs?wait=1", json={"input": {"order_id": "o-2"}}, timeout=60).json()
        assert run["status"] == "interrupted"
    finally:
        dev.stop()

    # With dev stopped, `agent-unit runs resume` reads the project's store and answers through the
    # run's workflow (never beside it): a worker alone finishes the run, and the workflow ends.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TEMPORAL_ADDRESS": temporal_server.address}
    worker = subprocess.Popen([sys.executable, "-m", "agent_unit_cli", "worker", "--root", str(root)], env=env)
    try:
        resumed = subprocess.run(
            [
                sys.executable,
                "-m",
                "agent_unit_cli",
                "runs",
                "resume",
                run["id"],
                '{"approved": true}',
                "--root",
                str(root),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert resumed.returncode == 0, resumed.stderr
        deadline = time.monotonic() + 60
        while (
            json.loads(temporal_server.run("workflow", "describe", "--workflow-id", run["id"], "--output", "json"))[
                "workflowExecutionInfo"
            ]["status"]
            != "WORKFLOW_EXECUTION_STATUS_COMPLETED"
        ):
            assert time.monotonic() < deadline, "the workflow did not complete"
            time.sleep(0.1)
    finally:
        worker.send_signal(signal.SIGINT)
        worker.wait(timeout=90)


def test_the_worker_command_executes_the_runs_an_http_only_server_starts(
    tmp_path: Path, temporal_server: TemporalServer
) -> None:
    root = project(tmp_path, temporal_server, "worker-queue")
    table = {"address": temporal_server.address, "task_queue": "worker-queue", "heartbeat": "2s"}
    options = {"temporal": table, "temporal_worker": False}
    env = {"TEST_AGENTS": "tests.support.temporal_agents:AGENTS", "TEST_OPTIONS": json.dumps(options)}
    server = Server(f"sqlite:///{tmp_path / 'runs.db'}", env=env).start()
    worker = subprocess.Popen(
        [sys.executable, "-m", "agent_unit_cli", "worker", "--root", str(root)],
        env={**os.environ, "PYTHONPATH": str(ROOT), "TEMPORAL_ADDRESS": temporal_server.address},
    )
    try:
        assert refund_through(server.url)["output"] == "refunded"
    finally:
        server.stop(signal.SIGKILL)
        worker.send_signal(signal.SIGINT)
        assert worker.wait(timeout=90) == 0  # Ctrl-C ends the worker quietly
