"""The Durable Objects runtime in real Pyodide: Python 3.14 compiled to WebAssembly, under Node.

Python Workers run on Pyodide. This runs the refund flow on the Durable Objects runtime in
npm's ``pyodide`` package, with the runtime's own dependencies installed from their wheels
(pydantic-core's ``pyemscripten`` build; pure-Python wheels unzipped into site-packages, as
micropip would without its CDN). The ``workers`` and ``js`` modules are the simulation
(``workers_sim``): workerd cannot run here. Two interpreters, one after the other, share the
simulated storage through a file: the first starts the run and parks it at its interrupt, the
second resumes it and sees it complete with the charge made once, then sleeps a run that its
object's alarm wakes (delivered twice, no step repeated). Threads, signal handlers and
subprocesses raise in both (``pyodide_flow.forbid``).

The package and the wheels are fetched once into the user's cache (``$XDG_CACHE_HOME`` or
``~/.cache``, under ``agent-unit/pyodide-<version>``), never into the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs Node (npm packages, Pyodide): left out of `make check`


PYODIDE = "314.0.7"
PLATFORM = "pyemscripten_2026_0_wasm32"
PURE = (
    "pydantic",
    "typing-extensions",
    "annotated-types",
    "typing-inspection",
    "starlette",
    "anyio",
    "idna",
    "cronsim",
)
HERE = Path(__file__).parent
REPO = HERE.parents[2]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _cache() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "agent-unit" / f"pyodide-{PYODIDE}"


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        _unavailable(f"{what} failed: {(done.stderr or done.stdout).strip()[-500:]}")


@pytest.fixture(scope="module")
def pyodide() -> tuple[Path, Path]:
    """The npm package's directory and a directory of the runtime's wheels, fetched once."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        _unavailable("Node.js (node and npm) is needed to run Pyodide")
    cache = _cache()
    package = cache / "node_modules" / "pyodide"
    if not (package / "pyodide.mjs").exists():
        cache.mkdir(parents=True, exist_ok=True)
        _run(["npm", "install", "--prefix", str(cache), "--no-audit", "--no-fund", f"pyodide@{PYODIDE}"], "npm install")
    wheels = cache / "wheels"
    pins = [f"{name}=={version(name)}" for name in PURE]
    core = f"pydantic-core=={version('pydantic-core')}"
    marker = wheels / ("+".join([core, *pins]) + ".done")
    if not marker.exists():
        shutil.rmtree(wheels, ignore_errors=True)
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(wheels)]
        _run([*pip, "--platform", PLATFORM, "--python-version", "3.14", core], f"downloading {core} for Pyodide")
        _run([*pip, *pins], "downloading the runtime's pure-Python wheels")
        marker.touch()
    return package, wheels


def _phase(pyodide: tuple[Path, Path], phase: str, state: Path) -> str:
    package, wheels = pyodide
    runner = HERE / "pyodide_run.mjs"
    command = ["node", str(runner), str(package), str(wheels), str(REPO), phase, str(state)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    said = [line for line in done.stdout.splitlines() if line.startswith("pyodide-flow: ")]
    readable = [line for line in done.stderr.splitlines() if len(line) < 400]  # not Node's dump of the minified source
    assert done.returncode == 0 and said, f"{phase} failed under Pyodide:\n" + "\n".join(readable[-40:])
    return said[-1].removeprefix("pyodide-flow: ")


def test_a_run_starts_parks_and_completes_across_two_pyodide_interpreters_with_no_thread_signal_or_subprocess(
    pyodide: tuple[Path, Path], tmp_path: Path
) -> None:
    state = tmp_path / "storage.json"
    started = _phase(pyodide, "start", state)
    assert started.startswith("interrupted run_")
    run_id = started.split()[-1]
    assert state.exists()
    completed = _phase(pyodide, "resume", state)
    assert completed.startswith(f"completed {run_id} on emscripten Python 3.14")
