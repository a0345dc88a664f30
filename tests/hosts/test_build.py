"""`agent-unit build`: the server output runs anywhere with only Python; errors are clear."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_unit_cli.main import app

from ..support import fetch
from ..support.server import free_port, wait_until_up

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in a subprocess: left out of `make check`


FIXTURES = Path(__file__).resolve().parents[1] / "support" / "fixtures"
runner = CliRunner()


def test_built_server_runs_from_a_moved_copy_in_an_empty_virtualenv(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "project_ok", project)
    result = runner.invoke(app, ["build", "--root", str(project), "--json"])
    assert result.exit_code == 0, result.output
    built = json.loads(result.output)
    assert built["agents"] == ["refund", "support"] and built["preset"] == "server"
    assert "POST   /a2a" in built["routes"] and "POST   /mcp" not in built["routes"]  # no MCP SDK vendored
    main = (Path(built["output"]) / "main.py").read_text()
    assert "REGISTRY" in main and "'support': ('support', 'support_agent')" in main

    moved = tmp_path / "elsewhere" / "server"
    shutil.copytree(built["output"], moved)
    shutil.rmtree(project)  # nothing of the project is left
    venv = tmp_path / "empty-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}
    server = subprocess.Popen(
        [str(venv / "bin" / "python"), "-I", "main.py"], cwd=moved, env={**env, "PORT": str(port), "HOST": "127.0.0.1"}
    )
    try:
        url = f"http://127.0.0.1:{port}"
        manifest = wait_until_up(url)
        assert [agent["name"] for agent in manifest["agents"]] == ["refund", "support"]
        done = fetch.post(f"{url}/agents/support/runs?wait=1", json={"input": "where is my order?"}, timeout=10).json()
        assert done["status"] == "completed" and done["output"] == "Hello! where is my order?"
        assert fetch.post(f"{url}/__agent-unit/sweep").status_code == 401  # a build needs AGENT_UNIT_SECRET
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert (moved / ".agent-unit" / "agent-unit.db").exists()  # the embedded store, beside where it runs


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        ({}, ["--preset", "lambda"], "unknown preset 'lambda'"),
        ({"agent-unit.toml": "storge = 'x'\n"}, [], "agent-unit.toml: storge: unknown key"),
        ({"agents/broken.py": "import nowhere\n"}, [], "agents/broken.py:1: nowhere"),
        ({"agents/broken.py": "raise RuntimeError('no')\n"}, [], "agents/broken.py failed to import"),
        ({"agents/empty.py": "X = 1\n"}, [], "agents/empty.py defines no agent"),
    ],
)
def test_build_errors_exit_1_with_a_clear_message(
    tmp_path: Path, files: dict[str, str], args: list[str], message: str
) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "ok.py").write_text(
        "from agent_unit import define_agent\n@define_agent\nasync def agent(i): ...\n"
    )
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    result = runner.invoke(app, ["build", "--root", str(tmp_path), *args])
    assert result.exit_code == 1 and message in result.output, result.output
    assert not (tmp_path / ".output").exists()


def test_presets_lists_each_preset() -> None:
    result = runner.invoke(app, ["presets"])
    assert result.exit_code == 0 and "server" in result.output and "docker" in result.output


def test_dev_serves_the_agents(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "project_ok", tmp_path / "project")
    port = free_port()
    dev = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agent_unit_cli",
            "dev",
            "--root",
            str(tmp_path / "project"),
            "--port",
            str(port),
            "--no-reload",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        manifest = wait_until_up(f"http://127.0.0.1:{port}")
        assert [agent["name"] for agent in manifest["agents"]] == ["refund", "support"]
    finally:
        dev.terminate()
        out, _ = dev.communicate(timeout=20)
    assert "refund" in out and "POST   /agents/{agent}/runs" in out and f"http://127.0.0.1:{port}" in out


def test_build_never_overwrites_the_project(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "project_ok", project)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    for out, message in [
        (project / "agents", "is inside the project's source (agents)"),
        (project / "agents" / "built", "is inside the project's source (agents)"),
        (tmp_path / "mine", "is not empty and was not written by agent-unit build"),
        (tmp_path, "would overwrite the project"),
    ]:
        result = runner.invoke(app, ["build", "--root", str(project), "--out", str(out)])
        assert result.exit_code == 1 and message in " ".join(result.output.split()), (out, result.output)
    assert (project / "agents" / "refund.py").exists() and (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    assert runner.invoke(app, ["build", "--root", str(project), "--out", str(tmp_path / "new")]).exit_code == 0
    assert runner.invoke(app, ["build", "--root", str(project), "--out", str(tmp_path / "new")]).exit_code == 0


def test_a_name_that_would_break_generated_code_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "project_ok", project)
    (project / "agent-unit.toml").write_text('name = \'x"""\\nimport os\'\n')
    result = runner.invoke(app, ["build", "--root", str(project)])
    output = " ".join(result.output.split())
    assert result.exit_code == 1 and "agent-unit.toml: name: String should match pattern" in output


def test_the_build_vendors_the_driver_of_its_store() -> None:
    from agent_unit_cli.build import _store_driver

    assert _store_driver("redis")[0].startswith("redis==")
    assert _store_driver("postgres")[0].startswith("psycopg[binary]==")
    assert _store_driver("dynamodb")[0].startswith("boto3==")
    assert _store_driver("sqlite") == []


@pytest.mark.parametrize("preset", ["server", "docker"])
def test_a_built_server_runs_on_uvloop_and_httptools_where_cpython_has_their_wheels(preset: str) -> None:
    from agent_unit_cli.build import _requirements
    from agent_unit_cli.config import Config
    from agent_unit_cli.presets import PRESETS

    chosen = _requirements(PRESETS[preset], Config(name="x"), "sqlite", [], {}, ())
    (httptools,) = [requirement for requirement in chosen if requirement.startswith("httptools")]
    assert httptools.startswith("httptools==") and httptools.endswith('; platform_python_implementation == "CPython"')
    (uvloop,) = [requirement for requirement in chosen if requirement.startswith("uvloop")]
    assert uvloop.startswith("uvloop==")
    assert uvloop.endswith('; sys_platform != "win32" and platform_python_implementation == "CPython"')
