"""Operating runs on a built server: a short interrupt deadline passes on the server's own timers; a
run failed by a bug is retried after the agent file is fixed and rebuilt, by two servers at once
(one wins), without repeating its earlier steps; and `agent-unit runs retry` does the same."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent_unit import RunEngine
from agent_unit.discovery import discover_agents
from agent_unit_cli.main import app

from ..support import fetch
from ..support.server import free_port, wait_until_up

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in subprocesses: left out of `make check`

runner = CliRunner()

APPROVE = """
from agent_unit import Run, define_agent


@define_agent
async def agent(input: None, run: Run) -> str:
    approved = await run.interrupt("approve", {"amount": 5}, answer=bool, timeout="1s", default=False)
    return "approved" if approved else "nobody answered"
"""

CHARGE = """
import os

from agent_unit import Run, StepContext, define_agent


def ledger(line: str) -> None:
    with open(os.environ["LEDGER_FILE"], "a") as f:
        f.write(line + "\\n")


@define_agent
async def agent(input: None, run: Run) -> str:
    order = await run.step("load", lambda: ledger("load") or {"amount": 5})

    def charge(step: StepContext) -> str:
        ledger(f"charge {step.idempotency_key} {step.attempt}")
        return "charged " + str(order[KEY])

    charged = await run.step("charge", charge)
    await run.step("notify", lambda: ledger("notify"))
    return charged
"""


def build(project: Path) -> Path:
    result = runner.invoke(app, ["build", "--root", str(project), "--json"])
    assert result.exit_code == 0, result.output
    return project / ".output" / "server"


@contextmanager
def serving(output: Path, ledger: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "PORT": str(port), "HOST": "127.0.0.1", "LEDGER_FILE": str(ledger)}
    server = subprocess.Popen([sys.executable, "main.py"], cwd=output, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)


def until_finished(url: str, run_id: str, seconds: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        record: dict[str, Any] = fetch.get(f"{url}/runs/{run_id}", timeout=10).json()
        if record["status"] in ("completed", "failed", "cancelled"):
            return record
        assert time.monotonic() < deadline, record
        time.sleep(0.1)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "agents").mkdir(parents=True)
    (root / "agents" / "approve.py").write_text(APPROVE)
    (root / "agents" / "charge.py").write_text(CHARGE.replace("KEY", "'missing'"))  # the bug
    (root / "agent-unit.toml").write_text('approval_timeout = "1h"\nrequire_answerer = false\n')
    return root


def test_a_short_deadline_passes_on_a_built_servers_own_timers(project: Path, tmp_path: Path) -> None:
    output = build(project)
    assert "approval_timeout='1h'" in (output / "main.py").read_text()
    with serving(output, tmp_path / "ledger") as url:
        parked = fetch.post(f"{url}/agents/approve/runs?wait=1", json={"input": None}, timeout=10).json()
        assert parked["status"] == "interrupted" and parked["interrupt"]["expires_at"]
        done = until_finished(url, parked["id"])
        assert done["output"] == "nobody answered" and done["answers"][0]["expired"] is True
        late = fetch.post(f"{url}/runs/{parked['id']}/resume", json={"answer": True}, timeout=10)
        assert late.status_code == 409 and late.json()["error"]["code"] == "interrupt_expired"
        assert "expired at" in late.json()["error"]["message"]


def test_a_run_failed_by_a_bug_is_retried_once_after_the_fix_by_two_servers_at_once(
    project: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    output = build(project)
    with serving(output, ledger) as url:
        failed = fetch.post(f"{url}/agents/charge/runs?wait=1", json={"input": None}, timeout=10).json()
    assert failed["status"] == "failed" and failed["error"]["step"] == "charge"
    assert failed["error"]["key"] == "step:charge#0"

    (project / "agents" / "charge.py").write_text(CHARGE.replace("KEY", "'amount'"))  # the fix
    store = output / ".agent-unit"
    kept = tmp_path / "store"
    shutil.copytree(store, kept)  # the deployment's store outlives the rebuild
    output = build(project)
    shutil.rmtree(output / ".agent-unit", ignore_errors=True)
    shutil.copytree(kept, output / ".agent-unit")

    with serving(output, ledger) as first, serving(output, ledger) as second:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(
                pool.map(
                    lambda url: fetch.post(f"{url}/runs/{failed['id']}/retry", timeout=20),
                    [first, second],
                )
            )
        assert sorted(answer.status_code for answer in answers) == [202, 409], [a.text for a in answers]
        done = until_finished(first, failed["id"])
    assert done["status"] == "completed" and done["output"] == "charged 5" and done["attempt"] == 2
    lines = ledger.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["load", "charge", "charge", "notify"]  # load ran once
    first_charge, second_charge = [line.split() for line in lines if line.startswith("charge")]
    assert first_charge[1] == second_charge[1] and (first_charge[2], second_charge[2]) == ("1", "2")


def test_runs_retry_on_the_command_line_retries_a_failed_run_of_the_local_store(project: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    os.environ["LEDGER_FILE"] = str(ledger)
    try:
        (project / "agent-unit.toml").write_text(f'storage = "sqlite:///{tmp_path / "runs.db"}"\n')

        async def fail_once() -> str:
            engine = RunEngine(discover_agents(project), f"sqlite:///{tmp_path / 'runs.db'}", background_sweep=False)
            record = await engine.start("charge", None, wait=True)
            await engine.aclose()
            return record.id

        run_id = asyncio.run(fail_once())
        (project / "agents" / "charge.py").write_text(CHARGE.replace("KEY", "'amount'"))  # the fix
        cli = [sys.executable, "-m", "agent_unit_cli", "runs", "retry", run_id, "--root", str(project)]
        result = subprocess.run([*cli, "--json"], capture_output=True, text=True, timeout=60)  # the fixed code
        assert result.returncode == 0, result.stderr
        assert '"status": "completed"' in result.stdout and '"output": "charged 5"' in result.stdout
        again = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert again.returncode == 1 and "is completed, not failed" in " ".join(again.stderr.split())
        assert "Traceback" not in again.stderr
    finally:
        os.environ.pop("LEDGER_FILE", None)
