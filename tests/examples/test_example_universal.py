"""examples/universal: the matrix runs, and prints its table, for a subset that fits the suite.

The whole matrix (every framework on every host) vendors every framework for every preset:
it is its own command, ``python examples/universal/matrix.py`` (see the example's README).
Here: the plain agent and the PydanticAI agent on the server and aws-lambda builds, each run
as its host runs it, through a pause, a restart of the host and a resume, with no effect or
model call repeated. Netlify is labelled, not run. The cloudflare column runs in real workerd,
in a module of its own (test_example_universal_workerd.py) that pytest-xdist runs beside this one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from ..support.server import ROOT
from ..support.servers import missing

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in a subprocess: left out of `make check`


MATRIX = ROOT / "examples" / "universal" / "matrix.py"


@pytest.mark.timeout(1800)  # builds that vendor with pip; a Lambda cold start after each restart
def test_plain_and_pydantic_ai_pass_on_server_and_lambda_and_netlify_is_labelled() -> None:
    if shutil.which("redis-server") is None:
        missing("redis-server")
    command = [
        sys.executable,
        str(MATRIX),
        "--hosts",
        "server,aws-lambda,netlify",
        "--agents",
        "plain,with_pydantic_ai",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    table = done.stdout[done.stdout.index("framework (agent)") :]
    rows = {line.split("|")[0].strip(): [cell.strip() for cell in line.split("|")[1:]] for line in table.splitlines()}
    assert rows["plain Python (plain)"] == ["ok", "ok", "proxy: not run here"]
    assert rows["PydanticAI (with_pydantic_ai)"] == ["ok", "ok", "proxy: not run here"]
    assert "netlify: built with --origin" in table
