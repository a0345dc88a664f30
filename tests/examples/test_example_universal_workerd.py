"""examples/universal's cloudflare column in real workerd: the plain and PydanticAI agents.

The matrix builds the cloudflare preset and serves it with ``wrangler dev`` as tests/hosts/workerd
does (the same Node 22, wrangler and Pyodide packages, installed once into the cache): a run is
started, parks, survives a restart of ``wrangler dev`` over the same local Durable Objects state,
and is resumed to ``completed``, each effect and model call made once. Its own module, so that
pytest-xdist runs it beside the other columns (tests/examples/test_example_universal.py).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from ..hosts.workerd.runtime import toolchain
from ..support.server import ROOT

pytestmark = pytest.mark.slow  # a build and wrangler dev: left out of `make check`

MATRIX = ROOT / "examples" / "universal" / "matrix.py"


@pytest.mark.timeout(1800)  # three starts of wrangler dev over Pyodide on a shared 2-core machine
def test_plain_and_pydantic_ai_pass_on_the_cloudflare_build_in_real_workerd() -> None:
    toolchain()  # skips saying how to get npm and the Pyodide bundle (fails in CI), and installs both once
    command = [sys.executable, str(MATRIX), "--hosts", "cloudflare", "--agents", "plain,with_pydantic_ai"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    table = done.stdout[done.stdout.index("framework (agent)") :]
    rows = {line.split("|")[0].strip(): [cell.strip() for cell in line.split("|")[1:]] for line in table.splitlines()}
    assert rows["plain Python (plain)"] == ["ok"], table
    assert rows["PydanticAI (with_pydantic_ai)"] == ["ok"], table
    assert "cloudflare: run in real workerd" in table
