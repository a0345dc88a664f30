"""Every code block of README.md runs as written, or is marked as a fragment.

A fragment is a block right after an HTML comment that starts with ``<!-- fragment`` (the
comment says why it does not run alone). Every other block runs here, in a temporary project
that holds each block naming its own file on its first line (``# agents/refund.py``):

- a python block naming an agent (``agents/...``) is loaded by discovery; one naming a test
  file runs under pytest; any other python block runs as a script, in its own process;
- a block that talks to ``http://localhost:3000`` gets a server of the same project at a free
  port instead (the URL is the one thing changed);
- a toml block is loaded as the project's configuration.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..support.server import ROOT, free_port, wait_until_up

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in a subprocess: left out of `make check`


README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\s*$")
LOCAL = "http://localhost:3000"


@dataclass(frozen=True)
class Block:
    line: int
    lang: str
    code: str
    fragment: bool

    @property
    def file(self) -> str | None:
        """The file a block names on its first line (``# agents/refund.py: ...``), if any."""
        found = re.match(r"#\s*([\w./-]+\.py)\b", self.code)
        return found.group(1) if found else None


def blocks() -> list[Block]:
    lines = README.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        start = i
        i += 1
        while not lines[i].startswith("```"):
            i += 1
        before = next((line for line in reversed(lines[:start]) if line.strip()), "")
        fragment = before.strip().startswith("<!-- fragment")
        found.append(Block(start + 1, opening.group(1), "\n".join(lines[start + 1 : i]) + "\n", fragment))
        i += 1
    return found


COMPLETE = [block for block in blocks() if not block.fragment]


def _env(project: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), str(ROOT)]), "PYTHONDONTWRITEBYTECODE": "1"}


def _run(args: list[str], project: Path) -> str:
    done = subprocess.run(args, cwd=project, env=_env(project), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(args[:3])}... failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project made of the README's blocks that name their files."""
    for block in COMPLETE:
        if block.lang == "python" and block.file is not None:
            path = tmp_path / block.file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.code)
    return tmp_path


@contextlib.contextmanager
def serving(project: Path) -> Iterator[str]:
    """The project's agents over HTTP (a uvicorn process, in-memory store): its URL."""
    (project / "serve_readme.py").write_text(
        'from agent_unit import create_agent_unit\n\napp = create_agent_unit(store="memory://")\n'
    )
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "serve_readme:app", "--port", str(port), "--log-level", "warning"],
        cwd=project,
        env=_env(project),
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_every_block_runs_here_or_is_marked_as_a_fragment() -> None:
    unmarked = [
        f"README.md:{block.line} ({block.lang or 'no language'})"
        for block in COMPLETE
        if block.lang not in ("python", "toml")
    ]
    assert unmarked == [], "mark these as <!-- fragment: why --> or make them runnable here"
    assert len([block for block in COMPLETE if block.lang == "python"]) >= 5


@pytest.mark.parametrize("block", [b for b in COMPLETE if b.lang == "python"], ids=lambda b: f"line{b.line}")
def test_a_python_block_of_the_readme_runs_as_written(block: Block, project: Path) -> None:
    # Names used only inside functions that this run never calls are caught here too.
    ruff = [
        sys.executable,
        "-m",
        "ruff",
        "check",
        "--no-cache",
        "--select",
        "F821",
        "--stdin-filename",
        "block.py",
        "-",
    ]
    undefined = subprocess.run(ruff, input=block.code, capture_output=True, text=True)
    assert undefined.returncode == 0, f"README.md:{block.line} uses undefined names:\n{undefined.stdout}"
    if block.file is not None and block.file.startswith("agents/"):
        name = Path(block.file).stem
        found = _run(
            [sys.executable, "-c", "from agent_unit.discovery import discover_agents as d; print(sorted(d('.')))"],
            project,
        )
        assert repr(name) in found
        return
    if block.file is not None and Path(block.file).name.startswith("test_"):
        _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", block.file], project)
        return
    script = project / "readme_block.py"
    if LOCAL not in block.code:
        script.write_text(block.code)
        _run([sys.executable, str(script)], project)
        return
    with serving(project) as url:
        script.write_text(block.code.replace(LOCAL, url))
        _run([sys.executable, str(script)], project)


@pytest.mark.parametrize("block", [b for b in COMPLETE if b.lang == "toml"], ids=lambda b: f"line{b.line}")
def test_a_toml_block_of_the_readme_is_a_valid_configuration(block: Block, tmp_path: Path) -> None:
    from agent_unit_cli.config import load_config

    (tmp_path / "agent-unit.toml").write_text(block.code)
    load_config(tmp_path)
