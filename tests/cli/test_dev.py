"""``agent-unit dev``, run as a user runs it: what it shows, what it watches, how it stops."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner
from watchfiles import Change

from agent_unit_cli.dev import ProjectFilter
from agent_unit_cli.main import app

from ..support import fetch
from ..support.dev_process import DevProcess
from ..support.server import ROOT, free_port, wait_until_up

pytestmark = pytest.mark.slow  # starts real servers in subprocesses: left out of `make check`

FAILING = """from agent_unit import define_agent


def charge(amount: int) -> None:
    raise RuntimeError(f"the card was declined for {amount}")


@define_agent(description="Charges a card.")
async def agent(input: dict, run) -> str:
    charge(input["amount"])
    return "charged"
"""

PID = """import os

from agent_unit import define_agent


@define_agent
async def agent(input: dict) -> int:
    return os.getpid()
"""


def _project(root: Path, **agents: str) -> Path:
    (root / "agents").mkdir(parents=True)
    for name, text in agents.items():
        (root / "agents" / f"{name}.py").write_text(text)
    return root


@pytest.fixture
def stopped() -> Iterator[list[DevProcess]]:
    """Every dev process a test starts is stopped at its end, whatever happened."""
    started: list[DevProcess] = []
    yield started
    for dev in started:
        dev.stop()


def test_a_failed_run_is_logged_with_the_traceback_of_the_users_code_and_requests_in_an_access_log(
    tmp_path: Path, stopped: list[DevProcess]
) -> None:
    dev = DevProcess(_project(tmp_path / "project", billing=FAILING))
    stopped.append(dev.up())
    run = fetch.post(f"{dev.url}/agents/billing/runs?wait=1", json={"input": {"amount": 12}}).json()
    assert run["status"] == "failed"
    output = dev.wait_for('"POST /agents/billing/runs?wait=1 HTTP/1.1" 200')
    assert f"run {run['id']} of agent 'billing' failed" in output
    assert re.search(r'File ".*agents/billing\.py", line 5, in charge\n\s+raise RuntimeError', output), output
    assert "RuntimeError: the card was declined for 12" in output


def test_log_level_warning_keeps_failed_runs_and_drops_the_access_log(
    tmp_path: Path, stopped: list[DevProcess]
) -> None:
    dev = DevProcess(_project(tmp_path / "project", billing=FAILING), "--log-level", "warning")
    stopped.append(dev.up())
    for _ in range(2):  # the second failure is logged after the first request's access line would be
        fetch.post(f"{dev.url}/agents/billing/runs?wait=1", json={"input": {"amount": 1}})
    output = dev.wait_for("RuntimeError: the card was declined", count=2)
    assert "HTTP/1.1" not in output


def test_dev_survives_a_build_ignores_outputs_and_environments_and_picks_up_a_new_agent(
    tmp_path: Path, stopped: list[DevProcess]
) -> None:
    root = _project(tmp_path / "project", pid=PID)
    dev = DevProcess(root)
    stopped.append(dev.up())
    build = subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "build", "--root", str(root)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert build.returncode == 0, build.stderr
    for ignored in (".agent-unit/helper.py", "env311/lib/site.py", "node_modules/x/index.py", ".venv/lib/x.py"):
        (root / ignored).parent.mkdir(parents=True, exist_ok=True)
        (root / ignored).write_text("X = 1\n")
    (root / "env311" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # a virtual environment of any name
    (root / "env311" / "lib" / "site.py").write_text("X = 2\n")
    assert fetch.get(f"{dev.url}/agents").status_code == 200
    (root / "agents" / "late.py").write_text(PID)
    output = dev.wait_for("serving on", count=2)
    manifest = wait_until_up(dev.url)
    assert sorted(agent["name"] for agent in manifest["agents"]) == ["late", "pid"]  # type: ignore[index]
    assert output.count("reloading:") == 1 and "reloading: agents/late.py changed" in output, output


@pytest.mark.parametrize(
    ("sig", "status"),
    [(signal.SIGTERM, 0), (signal.SIGINT, 0), (signal.SIGKILL, -signal.SIGKILL)],
    ids=["SIGTERM", "Ctrl-C", "killed"],
)
def test_stopping_dev_stops_its_worker(tmp_path: Path, stopped: list[DevProcess], sig: int, status: int) -> None:
    dev = DevProcess(_project(tmp_path / "project", pid=PID))
    stopped.append(dev.up())
    worker = fetch.post(f"{dev.url}/agents/pid/runs?wait=1", json={"input": {}}).json()["output"]
    assert worker != dev.process.pid
    assert dev.stop(sig) == status
    deadline = time.monotonic() + 30
    while _alive(worker):  # the worker may take a moment to be reaped; it must never outlive dev for long
        assert time.monotonic() < deadline, f"worker {worker} outlived dev"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")  # a zombie is gone


def test_a_startup_failure_ends_dev_with_one_message_and_a_non_zero_status(tmp_path: Path) -> None:
    root = _project(tmp_path / "project", pid=PID)
    (root / "agent-unit.toml").write_text('storage = "postgres://${NOT_SET_IN_ANY_TEST}/db"\n')
    done = subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "dev", "--root", str(root), "--port", str(free_port())],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,  # a dev left waiting in its reloader would hang here
    )
    assert done.returncode == 1
    assert done.stdout == "" and "serving on" not in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        "error: the store URL needs ${NOT_SET_IN_ANY_TEST}, which is not set: set it in the environment"
    )


def test_dev_serves_the_agent_card_at_the_address_it_listens_on(tmp_path: Path, stopped: list[DevProcess]) -> None:
    dev = DevProcess(_project(tmp_path / "project", pid=PID), "--host", "0.0.0.0", "--no-reload")
    stopped.append(dev.up())
    card = fetch.get(f"{dev.url}/.well-known/agent-card.json")
    assert card.status_code == 200 and card.json()["url"] == f"http://localhost:{dev.port}/a2a"


def test_dev_refuses_a_rebinding_host_and_serves_its_allowed_hosts(tmp_path: Path, stopped: list[DevProcess]) -> None:
    root = _project(tmp_path / "project", pid=PID)
    (root / "agent-unit.toml").write_text('allowed_hosts = ["dev.example.test"]\n')
    dev = DevProcess(root, "--no-reload")
    stopped.append(dev.up())
    for path in ["/runs", "/agents", "/ui/"]:
        foreign = fetch.get(f"{dev.url}{path}", headers={"host": f"attacker.example:{dev.port}"})
        assert foreign.status_code == 421 and foreign.json()["error"]["code"] == "forbidden_host", path
    listed = fetch.get(f"{dev.url}/runs", headers={"host": f"dev.example.test:{dev.port}"})
    assert listed.status_code == 200


def test_dev_restarts_for_the_projects_python_and_configuration_only(tmp_path: Path) -> None:
    root = tmp_path / "venv" / "project"  # a project inside a folder named venv still reloads
    (root / "env311").mkdir(parents=True)
    (root / "env311" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    watched = ProjectFilter(root)
    follows = {
        "agents/late.py": True,
        "lib/db.py": True,
        "agent-unit.toml": True,
        "pyproject.toml": True,
        "agents/notes.md": False,
        "agents/__pycache__/late.cpython-311.pyc": False,
        "agents/.#late.py": False,
        ".output/server/app/agents/late.py": False,
        ".output/server/vendor/agent_unit/_engine.py": False,
        ".agent-unit/agent-unit.db": False,
        ".venv/lib/python3.11/site-packages/x.py": False,
        "venv/lib/x.py": False,
        "env311/lib/python3.11/site.py": False,
        "node_modules/x/index.py": False,
        ".git/hooks/pre-commit.py": False,
    }
    assert {path: watched(Change.modified, str(root / path)) for path in follows} == follows
    assert watched(Change.added, str(tmp_path / "elsewhere.py")) is False


def test_dev_refuses_a_port_in_use_with_one_message(tmp_path: Path) -> None:
    root = _project(tmp_path / "project", pid=PID)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["dev", "--root", str(root), "--port", str(port)])
    assert isinstance(result.exception, SystemExit) and result.exit_code == 1
    assert result.output.startswith(f"error: cannot listen on 127.0.0.1:{port} (Address already in use)")


def test_a_broken_agent_file_is_served_as_broken_while_the_other_agents_answer_until_it_is_fixed(
    tmp_path: Path, stopped: list[DevProcess]
) -> None:
    root = _project(tmp_path / "project", pid=PID, other=PID)
    dev = DevProcess(root)
    stopped.append(dev.up())
    (root / "agents" / "pid.py").write_text(PID + "\n\ndef broken(:\n")  # line 11
    dev.wait_for("serving on", count=2)
    wait_until_up(dev.url)
    refused = fetch.post(f"{dev.url}/agents/pid/runs?wait=1", json={"input": {}})
    assert refused.status_code == 503, refused.text
    error = refused.json()["error"]
    assert error["code"] == "agent_broken" and error["details"] == {"file": "agents/pid.py", "line": 11}
    assert "agents/pid.py failed to import: SyntaxError" in error["message"]
    other = fetch.post(f"{dev.url}/agents/other/runs?wait=1", json={"input": {}})
    assert other.status_code == 200 and other.json()["status"] == "completed"
    manifest = fetch.get(f"{dev.url}/agents").json()
    assert [agent["name"] for agent in manifest["agents"]] == ["other"]
    assert [(item["name"], item["error"]["code"], item["error"]["details"]) for item in manifest["broken"]] == [
        ("pid", "agent_broken", {"file": "agents/pid.py", "line": 11})
    ]
    ag_ui = {"threadId": "t", "runId": "r", "messages": [], "tools": [], "context": [], "forwardedProps": {}}
    for answer in [  # every route of the agent says so
        fetch.post(f"{dev.url}/agents/pid/ag-ui", json=ag_ui),
        fetch.post(f"{dev.url}/agents/pid/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"}),
        fetch.get(f"{dev.url}/agents/pid/.well-known/agent-card.json"),
    ]:
        assert (answer.status_code, answer.json()["error"]["code"]) == (503, "agent_broken"), answer.request.url
    output = dev.output
    assert output.count("agents/pid.py failed to import: SyntaxError") == 1 and "Traceback" not in output, output
    (root / "agents" / "pid.py").write_text(PID)
    dev.wait_for("serving on", count=3)
    manifest = wait_until_up(dev.url)
    assert [agent["name"] for agent in manifest["agents"]] == ["other", "pid"] and "broken" not in manifest  # type: ignore[index,operator]
    fixed = fetch.post(f"{dev.url}/agents/pid/runs?wait=1", json={"input": {}})
    assert fixed.status_code == 200 and fixed.json()["status"] == "completed"


def test_dev_starts_with_a_broken_agent_but_dev_check_refuses_it(tmp_path: Path, stopped: list[DevProcess]) -> None:
    root = _project(tmp_path / "project", pid=PID, bad="from agent_unit import define_agent\n\nx = 1 / 0\n")
    checked = subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "dev", "--check", "--root", str(root), "--port", str(free_port())],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert checked.returncode == 1 and checked.stderr.startswith("error: agents/bad.py failed to import: ZeroDivision")
    dev = DevProcess(root)
    stopped.append(dev.up())
    assert "bad  broken (agents/bad.py:3)" in dev.output
    assert fetch.post(f"{dev.url}/agents/pid/runs?wait=1", json={"input": {}}).json()["status"] == "completed"
    assert fetch.post(f"{dev.url}/agents/bad/runs", json={"input": {}}).status_code == 503
