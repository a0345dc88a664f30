"""The wheel the README's Installation builds installs in a clean virtual environment and works there.

No package index has agent-unit yet, so this is how a user gets it outside a checkout. Its
dependencies come from the package index, as they would for the user (about a minute or two).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ..support.server import ROOT

pytestmark = pytest.mark.slow  # installs packages into virtual environments: left out of `make check`


def _run(args: list[str], cwd: Path) -> str:
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(args, cwd=cwd, env=environment, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.timeout(900)  # a clean install downloads every dependency
def test_the_wheel_builds_installs_in_a_clean_venv_and_its_command_and_package_work(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)], tmp_path)
    [wheel] = dist.glob("agent_unit-*-py3-none-any.whl")
    assert "agent_unit/py.typed" in zipfile.ZipFile(wheel).namelist()  # type checkers read the package's hints

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    bin = venv / ("Scripts" if sys.platform == "win32" else "bin")
    _run([str(bin / "python"), "-m", "pip", "install", "-q", str(wheel)], tmp_path)

    assert "Usage: agent-unit" in _run([str(bin / "agent-unit"), "--help"], tmp_path)
    where = _run(
        [str(bin / "python"), "-c", "import agent_unit, agent_unit.client; print(agent_unit.__file__)"], tmp_path
    )
    assert Path(where.strip()).is_relative_to(venv)  # the installed copy, not the checkout
