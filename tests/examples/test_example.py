"""The refund example runs as the README says: build, serve, pause, restart the server, resume."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in a subprocess: left out of `make check`


ROOT = Path(__file__).resolve().parents[2]


def test_refund_example_builds_pauses_restarts_and_resumes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "refund" / "main.py")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "RUN_INTERRUPTED" in done.stdout and "is interrupted after the restart" in done.stdout
    assert "completed, output 'refunded'" in done.stdout
    assert "load_order ran 1x, refund ran 1x" in done.stdout
