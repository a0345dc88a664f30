"""A ``server`` build with ``[temporal]`` runs from its own folder: the app and a worker in one
process, or each alone (``--no-worker``, ``--worker``), against a real Temporal dev server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_unit_cli.main import app

from ..support import fetch
from ..support.server import free_port, wait_until_up
from ..support.temporal import TemporalServer

pytestmark = pytest.mark.slow

AGENT = """from agent_unit import Run, define_agent


@define_agent(description="Asks, then answers.")
async def agent(input: str, run: Run) -> str:
    loaded = await run.step("load", lambda: input.upper())
    approved = await run.interrupt("approve", loaded, answer=bool)
    return f"{loaded}: {approved}"
"""


def refund(url: str) -> str:
    run = fetch.post(f"{url}/agents/refund/runs?wait=1", json={"input": "o-1"}, timeout=60).json()
    assert run["status"] == "interrupted", run
    resumed = fetch.post(f"{url}/runs/{run['id']}/resume?wait=1", json={"answer": True}, timeout=60)
    assert resumed.status_code in (200, 202), resumed.text
    deadline = time.monotonic() + 60
    while (done := fetch.get(f"{url}/runs/{run['id']}", timeout=10).json())["status"] != "completed":
        assert time.monotonic() < deadline, done
        time.sleep(0.05)
    return str(done["output"])


def test_a_server_build_with_temporal_runs_the_app_and_a_worker_together_or_apart(
    tmp_path: Path, temporal_server: TemporalServer
) -> None:
    project = tmp_path / "project"
    (project / "agents").mkdir(parents=True)
    (project / "agents" / "refund.py").write_text(AGENT)
    (project / "agent-unit.toml").write_text(
        '[temporal]\naddress = "${TEMPORAL_ADDRESS}"\ntask_queue = "built"\nheartbeat = "5s"\n'
    )
    result = CliRunner().invoke(app, ["build", "--root", str(project), "--json"])
    assert result.exit_code == 0, result.output
    output = Path(json.loads(result.output)["output"])
    assert list((output / "vendor").glob("temporalio*"))  # the SDK is vendored

    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env = {**env, "TEMPORAL_ADDRESS": temporal_server.address, "HOST": "127.0.0.1"}
    processes: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> str:
        port = free_port()
        processes.append(
            subprocess.Popen([sys.executable, "-I", "main.py", *args], cwd=output, env={**env, "PORT": str(port)})
        )
        return f"http://127.0.0.1:{port}"

    try:
        together = start()
        wait_until_up(together)
        assert refund(together) == "O-1: True"
        alone = processes.pop()
        alone.terminate()
        alone.wait(timeout=30)  # SIGTERM stops the app and its worker (uvicorn then ends by the signal)

        apart = start("--no-worker")
        start("--worker")
        wait_until_up(apart)
        assert refund(apart) == "O-1: True"
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
