"""``[tasks.NAME]`` in builds: each host's own scheduler runs the task, as the host runs it.

- server: the built folder, moved elsewhere, served by ``python -I -S main.py``; its in-process
  scheduler runs the latest tick of a task due every minute as it starts (the catch-up rule);
- aws-lambda: the template has one EventBridge Scheduler schedule for the task, cfn-lint stays
  clean, and the schedule's event runs the task in a new cold process from the unpacked zip,
  once (a repeated delivery, to another new process, runs nothing);
- vercel: ``config.json`` has one cron for the task, and the cron's request to an instance
  started as Vercel starts one runs it with ``Bearer $CRON_SECRET``, once (a repeated request
  for the same tick runs nothing).

Builds run pip, so each is built once per module and shared by the tests that read it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ..support import fetch
from ..support.server import free_port, wait_until_up
from . import test_preset_vercel
from .test_preset_aws_lambda import Lambda, lint
from .test_preset_vercel import CRON_SECRET, FUNCTION, Instance

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in a subprocess: left out of `make check`

function_python = test_preset_vercel.function_python  # the fixture: a Python 3.12+ for Vercel's runtime

PLAIN = """from agent_unit import define_agent


@define_agent
async def agent(text: str) -> str:
    return f"plain: {text}"
"""

DIGEST = """import os
from pathlib import Path


async def send_digest(name, scheduled_at):
    with Path(os.environ["TASK_LOG"]).open("a") as out:
        out.write(f"{name} {scheduled_at.isoformat()}\\n")
    return "sent"
"""

TASKS = """
[tasks.send-digest]
schedule = "*/5 * * * 1-5"
handler = "jobs.digest:send_digest"

[tasks.every-minute]
schedule = "* * * * *"
handler = "jobs.digest:send_digest"
"""


def project(folder: Path, config: str) -> Path:
    (folder / "agents").mkdir(parents=True)
    (folder / "agents" / "plain.py").write_text(PLAIN)
    (folder / "jobs").mkdir()
    (folder / "jobs" / "__init__.py").write_text("")
    (folder / "jobs" / "digest.py").write_text(DIGEST)
    (folder / "agent-unit.toml").write_text(config + TASKS)
    return folder


def build(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "build", "--root", str(root), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
    )


def built(root: Path, *args: str) -> dict[str, Any]:
    done = build(root, "--json", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def ran(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture(scope="module")
def server_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = project(tmp_path_factory.mktemp("tasks-server"), 'storage = "sqlite:///runs.db"\n')
    return root, built(root)


@pytest.fixture(scope="module")
def lambda_build(tmp_path_factory: pytest.TempPathFactory, redis_server: Any) -> tuple[Path, dict[str, Any]]:
    root = project(tmp_path_factory.mktemp("tasks-lambda"), f'storage = "{redis_server.url}"\n')
    result = built(root, "--preset", "aws-lambda")
    with zipfile.ZipFile(root / ".output" / "aws-lambda" / "function.zip") as archive:
        archive.extractall(root / "function")
    return root, result


@pytest.fixture(scope="module")
def vercel_build(
    tmp_path_factory: pytest.TempPathFactory, redis_server: Any, function_python: tuple[str, str]
) -> tuple[Path, dict[str, Any]]:
    root = project(tmp_path_factory.mktemp("tasks-vercel"), f'storage = "{redis_server.url}"\n')
    return root, built(root, "--preset", "vercel", "--python", function_python[1])


def test_the_server_build_reports_its_tasks_and_vendors_cronsim(server_build: tuple[Path, dict[str, Any]]) -> None:
    root, result = server_build
    assert [(task["name"], task["schedule"]) for task in result["tasks"]] == [
        ("every-minute", "* * * * *"),
        ("send-digest", "*/5 * * * 1-5"),
    ]
    assert all("in-process scheduler" in task["runs_on"] for task in result["tasks"])
    assert (root / ".output" / "server" / "vendor" / "cronsim").is_dir()


def test_a_moved_server_build_runs_its_task_on_its_own_scheduler(
    server_build: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    root, _ = server_build
    moved = tmp_path / "elsewhere" / "server"
    shutil.copytree(root / ".output" / "server", moved)
    log = tmp_path / "tasks.log"
    port = free_port()
    environment = {"PATH": os.environ["PATH"], "PORT": str(port), "HOST": "127.0.0.1", "TASK_LOG": str(log)}
    server = subprocess.Popen([sys.executable, "-I", "-S", "main.py"], cwd=moved, env=environment)
    try:
        wait_until_up(f"http://127.0.0.1:{port}", timeout=120)
        deadline = time.monotonic() + 60
        while not any(line.startswith("every-minute ") for line in ran(log)):  # its latest tick, caught up at start
            assert time.monotonic() < deadline, "the scheduler did not run the task"
            time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(timeout=20)
    lines = ran(log)
    assert len(set(lines)) == len(lines), lines  # no tick ran twice
    ticks = [datetime.fromisoformat(line.split()[1]) for line in lines if line.startswith("every-minute ")]
    # The tick caught up at start, and the next one only if the minute turned before the server stopped
    # (a loaded machine can take that long to see the first line).
    assert ticks in ([ticks[0]], [ticks[0], ticks[0] + timedelta(minutes=1)]), lines


def test_the_lambda_template_has_one_schedule_per_task_and_passes_cfn_lint(
    lambda_build: tuple[Path, dict[str, Any]],
) -> None:
    root, result = lambda_build
    template = (root / ".output" / "aws-lambda" / "template.yaml").read_text()
    assert lint(template) == []
    assert 'ScheduleExpression: "cron(0/5 * ? * MON-FRI *)"' in template
    assert 'ScheduleExpression: "cron(* * * * ? *)"' in template
    assert template.count("Type: ScheduleV2") == 3  # the sweep and the two tasks
    assert "aws.scheduler.scheduled-time" in template
    assert all("EventBridge Scheduler" in task["runs_on"] for task in result["tasks"])


def test_a_schedule_event_runs_its_task_once_in_a_cold_lambda(
    lambda_build: tuple[Path, dict[str, Any]], redis_url: str, tmp_path: Path
) -> None:
    root, _ = lambda_build
    log = tmp_path / "tasks.log"
    # cold: the repeated delivery goes to a container that never saw the first, so only the store can refuse it
    function = Lambda(root / "function", {"AGENT_UNIT_STORAGE": redis_url, "TASK_LOG": str(log)}, cold=True)
    event = {"agent_unit": "task", "task": "send-digest", "scheduled_at": "2026-12-01T08:05:00Z"}
    first = function.invoke(event)
    assert first == {"task": "send-digest", "scheduled_at": "2026-12-01T08:05:00+00:00", "ran": True}
    assert function.invoke(event)["ran"] is False  # EventBridge delivers at least once: the tick is claimed
    assert ran(log) == ["send-digest 2026-12-01T08:05:00+00:00"]


def test_vercel_has_one_cron_per_task_at_its_route(vercel_build: tuple[Path, dict[str, Any]]) -> None:
    root, result = vercel_build
    config = json.loads((root / ".vercel" / "output" / "config.json").read_text())
    assert config["crons"] == [
        {"path": "/__agent-unit/sweep", "schedule": "* * * * *"},
        {"path": "/__agent-unit/tasks/every-minute", "schedule": "* * * * *"},
        {"path": "/__agent-unit/tasks/send-digest", "schedule": "*/5 * * * 1-5"},
    ]
    assert all("Vercel cron" in task["runs_on"] for task in result["tasks"])


def test_vercels_cron_request_runs_the_task_in_a_function_instance(
    vercel_build: tuple[Path, dict[str, Any]], redis_url: str, function_python: tuple[str, str], tmp_path: Path
) -> None:
    root, _ = vercel_build
    log = tmp_path / "tasks.log"
    env = {"AGENT_UNIT_STORAGE": redis_url, "CRON_SECRET": CRON_SECRET, "TASK_LOG": str(log)}
    instance = Instance(root / ".vercel" / "output" / FUNCTION, function_python[0], env).start()
    try:
        route = f"{instance.url}/__agent-unit/tasks/every-minute"
        assert fetch.get(route, headers={"authorization": "Bearer wrong"}).status_code == 401
        done = fetch.get(route, headers={"authorization": f"Bearer {CRON_SECRET}"}, timeout=30)
        assert done.status_code == 200 and done.json()["ran"] is True, instance.logs()
    finally:
        instance.stop()
    assert [line.split()[0] for line in ran(log)] == ["every-minute"]


def test_a_repeated_vercel_cron_request_runs_its_tick_once(
    vercel_build: tuple[Path, dict[str, Any]], redis_url: str, function_python: tuple[str, str], tmp_path: Path
) -> None:
    """Vercel may deliver a cron twice: the tick (the schedule's latest, at the request) is claimed in the store."""
    root, _ = vercel_build
    log = tmp_path / "tasks.log"
    env = {"AGENT_UNIT_STORAGE": redis_url, "CRON_SECRET": CRON_SECRET, "TASK_LOG": str(log)}
    instance = Instance(root / ".vercel" / "output" / FUNCTION, function_python[0], env).start()
    route = f"{instance.url}/__agent-unit/tasks/send-digest"
    answers: list[dict[str, Any]] = []
    try:
        # two requests for one tick (a third only if a tick of */5 fell between the first two)
        while len(answers) < 2 or (answers[-1]["scheduled_at"] != answers[-2]["scheduled_at"] and len(answers) < 3):
            answer = fetch.get(route, headers={"authorization": f"Bearer {CRON_SECRET}"}, timeout=30)
            answers.append(answer.json())
    finally:
        instance.stop()
    assert answers[-1]["scheduled_at"] == answers[-2]["scheduled_at"], answers
    assert answers[-1]["ran"] is False  # the same tick again: nothing ran
    ticks = {answer["scheduled_at"] for answer in answers}
    assert sorted(ran(log)) == sorted(f"send-digest {tick}" for tick in ticks)  # each tick once


def test_netlify_warns_and_names_the_tasks_nothing_schedules(tmp_path: Path) -> None:
    root = project(tmp_path, "")
    result = built(root, "--preset", "netlify", "--origin", "https://agents.example.com")
    assert any("every-minute, send-digest run only when triggered" in warning for warning in result["warnings"])


@pytest.mark.parametrize(
    "args",
    [[], ["--preset", "netlify", "--origin", "https://agents.example.com"]],
    ids=["server", "netlify"],  # netlify runs no Python, yet the handler is imported from source at build
)
@pytest.mark.parametrize(
    ("handler", "message"),
    [
        ("jobs.digest:missing", "task send-digest: handler 'jobs.digest:missing': module jobs.digest has no attribute"),
        (
            "jobs.broken:send",
            "jobs.broken failed to import: ZeroDivisionError: division by zero (jobs/broken.py, line 1",
        ),
    ],
)
def test_a_handler_that_cannot_be_imported_is_one_build_error_and_nothing_is_written(
    tmp_path: Path, handler: str, message: str, args: list[str]
) -> None:
    root = project(tmp_path, "")
    (root / "jobs" / "broken.py").write_text("1 / 0\n")
    (root / "agent-unit.toml").write_text(f'[tasks.send-digest]\nschedule = "0 8 * * *"\nhandler = "{handler}"\n')
    done = build(root, "--json", *args)
    assert done.returncode == 1, done.stdout
    assert message in json.loads(done.stdout)["error"]
    assert "Traceback" not in done.stdout + done.stderr
    assert not (root / ".output").exists()
