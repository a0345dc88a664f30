"""Build presets are pluggable: a third-party ``Preset`` published through the ``agent_unit.presets``
entry-point group is listed by ``agent-unit presets`` and builds with ``--preset NAME``.

The example package (``examples/agent-unit-preset-procfile``) is installed with pip into a folder
of its own, as a user installs it; its build reuses agent-unit's ``server`` template and adds its
own, vendors nothing (the platform installs ``requirements.txt``), and the moved output serves
its agent with the packages ``requirements.txt`` lists installed, as the platform runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..support import fetch
from ..support.server import ROOT, free_port, wait_until_up

pytestmark = pytest.mark.slow  # installs a package with pip, builds and starts the output

AGENT = """from agent_unit import Run, define_agent


@define_agent
async def plain(input: str, run: Run) -> str:
    return await run.step("say", lambda: f"plain: {input}")
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example preset's package, installed into a folder of its own (not the shared environment)."""
    folder = tmp_path_factory.mktemp("preset-site")
    example = ROOT / "examples" / "agent-unit-preset-procfile"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(folder), str(example)],
        check=True,
        capture_output=True,
    )
    return folder


def cli(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path, "COLUMNS": "200"},
        timeout=600,
    )


def test_agent_unit_presets_lists_an_installed_preset_beside_the_built_ins(site: Path) -> None:
    done = cli(site, "presets")
    assert done.returncode == 0, done.stderr
    assert "procfile" in done.stdout and ".output/procfile" in done.stdout and "aws-lambda" in done.stdout
    assert "server presets (server = NAME): google-adk" in done.stdout


def test_an_installed_preset_builds_with_its_own_templates_and_the_output_serves(site: Path, tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "agents").mkdir(parents=True)
    (root / "agents" / "plain.py").write_text(AGENT)
    done = cli(site, "build", "--root", str(root), "--preset", "procfile", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    output = Path(result["output"])
    assert result["preset"] == "procfile" and output == root / ".output" / "procfile"
    assert (output / "Procfile").read_text() == "web: python main.py\n"
    requirements = (output / "requirements.txt").read_text().splitlines()
    assert any(line.startswith("pydantic==") for line in requirements)
    assert (output / "app" / "agent_unit").is_dir() and not (output / "vendor").exists()

    moved = tmp_path / "elsewhere"
    shutil.copytree(output, moved)
    port = free_port()
    # the platform's Python with requirements.txt installed: this environment has every package it lists
    env = {"PATH": os.environ["PATH"], "PORT": str(port), "HOST": "127.0.0.1"}
    server = subprocess.Popen([sys.executable, "main.py"], cwd=moved, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        assert [agent["name"] for agent in wait_until_up(url, timeout=60)["agents"]] == ["plain"]
        run = fetch.post(f"{url}/agents/plain/runs?wait=1", json={"input": "hi"}, timeout=30).json()
        assert run["status"] == "completed" and run["output"] == "plain: hi", run
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_an_installed_presets_own_check_refuses_with_its_message(site: Path, tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "agents").mkdir(parents=True)
    (root / "agents" / "plain.py").write_text(AGENT)
    done = cli(site, "build", "--root", str(root), "--preset", "procfile", "--arch", "arm64")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "--arch arm64: the platform installs requirements.txt for its own machines" in done.stderr
