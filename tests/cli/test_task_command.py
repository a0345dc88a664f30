"""``agent-unit task``, run as a user runs it: a new process in the project folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts real servers in subprocesses: left out of `make check`

CONFIG = """\
[tasks.digest]
schedule = "0 8 * * *"
handler = "jobs.tasks:send_digest"

[tasks.broken]
schedule = "*/5 * * * 1-5"
handler = "jobs.tasks:explode"

[tasks.missing]
schedule = "0 9 * * 1"
handler = "jobs.nothere:run"

[tasks.unloadable]
schedule = "0 9 1 * *"
handler = "jobs.bad:run"
"""

TASKS = """\
import asyncio
from pathlib import Path

from agent_unit.env import env, wait_until


async def send_digest(name, scheduled_at):
    async def note():
        await asyncio.sleep(0.05)
        Path("waited.txt").write_text("done")

    wait_until(note())
    return {"task": name, "tz": str(scheduled_at.tzinfo), "key": env.get("DIGEST_KEY")}


def explode(name, scheduled_at):
    helper()


def helper():
    raise ValueError("no recipients")
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "agent-unit.toml").write_text(CONFIG)
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "__init__.py").write_text("")
    (tmp_path / "jobs" / "tasks.py").write_text(TASKS)
    (tmp_path / "jobs" / "bad.py").write_text(textwrap.dedent("import json\nSETTINGS = json.loads('{oops')\n"))
    return tmp_path


def agent_unit(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "DIGEST_KEY": "k-123", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "task", *args],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_task_runs_once_from_source_and_prints_what_it_returned(project: Path) -> None:
    done = agent_unit(project, "digest", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["task"] == "digest"
    assert result["result"] == {"task": "digest", "tz": "UTC", "key": "k-123"}  # the project's environment
    assert datetime.fromisoformat(result["scheduled_at"]).tzinfo is not None
    assert (project / "waited.txt").read_text() == "done"  # its wait_until work ran before the exit

    shown = agent_unit(project, "digest")
    assert shown.returncode == 0 and "ran digest" in shown.stdout and '"key": "k-123"' in shown.stdout


def test_a_task_that_raises_exits_1_with_its_own_traceback_lines_only(project: Path) -> None:
    failed = agent_unit(project, "broken")
    assert failed.returncode == 1
    assert "task broken failed" in failed.stderr
    assert str(Path("jobs") / "tasks.py") in failed.stderr and "in helper" in failed.stderr
    assert 'raise ValueError("no recipients")' in failed.stderr
    assert failed.stderr.rstrip().endswith("ValueError: no recipients")
    assert "agent_unit" not in failed.stderr and "asyncio" not in failed.stderr and "typer" not in failed.stderr


def test_without_a_name_the_tasks_are_listed_with_schedules_and_next_runs(project: Path) -> None:
    listed = agent_unit(project)
    assert listed.returncode == 0, listed.stderr
    for name, schedule in [("digest", "0 8 * * *"), ("broken", "*/5 * * * 1-5"), ("missing", "0 9 * * 1")]:
        assert name in listed.stdout and schedule in listed.stdout
    as_json = json.loads(agent_unit(project, "--json").stdout)
    by_name = {entry["name"]: entry for entry in as_json["tasks"]}
    assert sorted(by_name) == ["broken", "digest", "missing", "unloadable"]
    digest = datetime.fromisoformat(by_name["digest"]["next_run"])
    assert (digest.hour, digest.minute, digest.utcoffset()) == (
        8,
        0,
        digest.utcoffset(),
    ) and digest.utcoffset() is not None
    assert by_name["digest"]["handler"] == "jobs.tasks:send_digest"
    assert datetime.fromisoformat(by_name["missing"]["next_run"]).weekday() == 0  # cron's 1 is Monday


def test_an_unknown_name_lists_the_known_ones(project: Path) -> None:
    unknown = agent_unit(project, "digets")
    assert unknown.returncode == 1
    assert "no task named 'digets': the tasks are broken, digest, missing, unloadable" in unknown.stderr


def test_a_handler_that_cannot_be_imported_is_one_clear_error(project: Path) -> None:
    missing = agent_unit(project, "missing")
    assert missing.returncode == 1
    assert "task missing: handler 'jobs.nothere:run': no module named 'jobs.nothere'" in missing.stderr
    unloadable = agent_unit(project, "unloadable")
    assert unloadable.returncode == 1
    assert "jobs.bad failed to import: JSONDecodeError" in unloadable.stderr
    assert "(jobs/bad.py, line 2: SETTINGS = json.loads('{oops'))" in " ".join(unloadable.stderr.split())
    assert "Traceback" not in unloadable.stderr
