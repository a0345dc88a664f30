"""``agent-unit runs``: the approvals inbox from a terminal, on the local store or a deployment."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent_unit.discovery import discover_agents
from agent_unit.runtime import RunEngine
from agent_unit_cli.config import load_config, store_url
from agent_unit_cli.main import app

from ..support import fetch
from ..support.dev_process import DevProcess

runner = CliRunner()

APPROVAL = """from pydantic import BaseModel

from agent_unit import define_agent


class Approval(BaseModel):
    approved: bool


@define_agent(description="Refunds an order once a human approves.")
async def agent(input: dict, run) -> str:
    order = await run.step("load-order", lambda: {"id": input["order_id"], "amount": 12})
    decision = await run.interrupt("approve-refund", order, answer=Approval)
    return "refunded" if decision.approved else "declined"
"""

AUTH = """def check(request, action, run):
    return request.headers.get("authorization") == "Bearer s3cret"
"""


NAP = """import os

from agent_unit import define_agent


@define_agent(description="Waits for a go, naps two seconds, says which processes ran it.")
async def agent(input: dict, run) -> dict:
    await run.interrupt("go", {}, answer=bool)
    resumed_in = await run.step("resumed-in", os.getpid)
    await run.sleep("2s")
    return {"resumed_in": resumed_in, "woke_in": os.getpid()}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "refund.py").write_text(APPROVAL)
    return tmp_path


def _cli(*args: str) -> Any:
    result = runner.invoke(app, ["runs", *args])
    assert result.exit_code == 0, result.output
    return result


def _parked_run(root: Path) -> str:
    """Start a run on the project's own store, as dev would, and let it park."""
    config, _ = load_config(root)

    async def start() -> str:
        engine = RunEngine(discover_agents(root), store_url(root, config), background_sweep=False)
        try:
            record = await engine.start("refund", {"order_id": "o_1"}, wait=True)
        finally:
            await engine.aclose()
        assert record.status.value == "interrupted"
        return record.id

    return asyncio.run(start())


def test_runs_round_trip_on_the_local_store(project: Path) -> None:
    run_id = _parked_run(project)
    inbox = json.loads(_cli("--status", "interrupted", "--json", "--root", str(project)).stdout)
    assert [(run["id"], run["interrupt"]["name"]) for run in inbox] == [(run_id, "approve-refund")]
    table = _cli("--status", "interrupted", "--root", str(project)).stdout
    assert run_id in table and "approve-refund" in table
    assert json.loads(_cli("--status", "completed", "--json", "--root", str(project)).stdout) == []

    refused = runner.invoke(app, ["runs", "resume", run_id, '{"approved": "maybe"}', "--root", str(project)])
    assert refused.exit_code == 1 and "Traceback" not in refused.output and refused.output.startswith("error: ")

    done = json.loads(_cli("resume", run_id, '{"approved": true}', "--json", "--root", str(project)).stdout)
    assert (done["status"], done["output"]) == ("completed", "refunded")
    shown = json.loads(_cli("show", run_id, "--json", "--root", str(project)).stdout)
    assert shown["run"]["status"] == "completed"
    types = [event["type"] for event in shown["events"]]
    assert types[0] == "RUN_STARTED" and "RUN_INTERRUPTED" in types and types[-1] == "RUN_FINISHED"
    printed = _cli("show", run_id, "--root", str(project)).stdout
    assert "RUN_INTERRUPTED" in printed and "refunded" in printed

    missing = runner.invoke(app, ["runs", "show", "run_missing", "--root", str(project)])
    assert missing.exit_code == 1 and missing.output.strip() == "error: run 'run_missing' does not exist"


def test_runs_cancel_on_the_local_store(project: Path) -> None:
    run_id = _parked_run(project)
    cancelled = json.loads(_cli("cancel", run_id, "--json", "--root", str(project)).stdout)
    assert cancelled["status"] == "cancelled"
    assert json.loads(_cli("--status", "interrupted", "--json", "--root", str(project)).stdout) == []


@pytest.fixture
def deployment(project: Path) -> Iterator[DevProcess]:
    (project / "auth.py").write_text(AUTH)
    (project / "agent-unit.toml").write_text('authorize = "auth:check"\n')
    dev = DevProcess(project, "--no-reload")
    try:
        yield dev.up()
    finally:
        dev.stop()


def test_runs_round_trip_through_a_deployments_url(deployment: DevProcess, tmp_path: Path) -> None:
    auth = {"authorization": "Bearer s3cret"}
    run_id = fetch.post(
        f"{deployment.url}/agents/refund/runs?wait=1", json={"input": {"order_id": "o_2"}}, headers=auth
    ).json()["id"]
    elsewhere = str(tmp_path / "elsewhere")  # no project here: --url needs none
    remote = ("--url", deployment.url, "--token", "s3cret", "--root", elsewhere)

    inbox = json.loads(_cli("--status", "interrupted", "--json", *remote).stdout)
    assert [run["id"] for run in inbox] == [run_id]
    done = json.loads(_cli("resume", run_id, '{"approved": false}', "--json", *remote).stdout)
    assert (done["status"], done["output"]) == ("completed", "declined")
    types = [event["type"] for event in json.loads(_cli("show", run_id, "--json", *remote).stdout)["events"]]
    assert "RUN_INTERRUPTED" in types and types[-1] == "RUN_FINISHED"

    refused = runner.invoke(app, ["runs", "--url", deployment.url])  # no token: authorize says no
    assert refused.exit_code == 1 and refused.output.strip() == "error: not allowed to list"
    unreachable = runner.invoke(app, ["runs", "--url", "http://127.0.0.1:9"])
    assert unreachable.exit_code == 1 and unreachable.output.startswith("error: cannot reach http://127.0.0.1:9")
    assert "Traceback" not in unreachable.output


def test_runs_outside_a_project_says_so_and_creates_nothing(tmp_path: Path) -> None:
    result = runner.invoke(app, ["runs", "--root", str(tmp_path)])
    assert result.exit_code == 1 and result.output.startswith("error: no runs here:")
    assert list(tmp_path.iterdir()) == []


def test_runs_resume_on_the_local_store_goes_through_a_running_dev_so_a_short_sleep_wakes_on_time(
    project: Path,
) -> None:
    (project / "agents" / "nap.py").write_text(NAP)
    dev = DevProcess(project)  # with its reloading worker, as a user runs it
    try:
        dev.up()
        run_id = fetch.post(f"{dev.url}/agents/nap/runs?wait=1", json={"input": {}}).json()["id"]
        resumed = time.monotonic()
        parked = json.loads(_cli("resume", run_id, "true", "--json", "--root", str(project)).stdout)
        assert parked["status"] == "sleeping", parked
        while (run := fetch.get(f"{dev.url}/runs/{run_id}").json())["status"] == "sleeping":
            assert time.monotonic() - resumed < 8, "the run slept past its 2 s: dev did not hear of the resume"
            time.sleep(0.1)
        assert run["status"] == "completed", run
        output = run["output"]
        assert output["resumed_in"] == output["woke_in"] != os.getpid()  # dev's worker ran it, not this process
        assert (project / ".agent-unit" / "dev.json").is_file()
    finally:
        dev.stop()
    assert not (project / ".agent-unit" / "dev.json").exists()  # a stopped dev is not asked again


def test_runs_resume_uses_the_store_when_the_recorded_dev_is_gone(project: Path) -> None:
    run_id = _parked_run(project)
    config, _ = load_config(project)
    gone = {"url": "http://127.0.0.1:9", "pid": os.getpid(), "store": store_url(project, config)}
    (project / ".agent-unit" / "dev.json").write_text(json.dumps(gone))  # a dev killed with SIGKILL
    done = json.loads(_cli("resume", run_id, '{"approved": true}', "--json", "--root", str(project)).stdout)
    assert (done["status"], done["output"]) == ("completed", "refunded")


def test_runs_resume_through_a_dev_that_authorize_refuses_says_so_and_uses_the_store(
    deployment: DevProcess, project: Path
) -> None:
    auth = {"authorization": "Bearer s3cret"}
    started = fetch.post(
        f"{deployment.url}/agents/refund/runs?wait=1", json={"input": {"order_id": "o_3"}}, headers=auth
    )
    run_id = started.json()["id"]
    result = runner.invoke(app, ["runs", "resume", run_id, '{"approved": true}', "--json", "--root", str(project)])
    assert result.exit_code == 0, result.output
    assert f"note: agent-unit dev at {deployment.url} refused to resume" in result.output
    assert json.loads(result.stdout.splitlines()[-1])["status"] == "completed"
    second = fetch.post(
        f"{deployment.url}/agents/refund/runs?wait=1", json={"input": {"order_id": "o_4"}}, headers=auth
    )
    with_token = _cli("cancel", second.json()["id"], "--json", "--token", "s3cret", "--root", str(project))
    assert "note:" not in with_token.output and json.loads(with_token.stdout)["status"] == "cancelled"
