"""The refund example runs as the README says: pause, restart in a new process, resume."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_refund_example_pauses_restarts_and_resumes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "refund" / "main.py")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "is interrupted: approve-refund" in done.stdout
    assert "a wrong answer is refused, the run stays parked" in done.stdout
    assert "is completed: output 'refunded'" in done.stdout
    assert "load_order ran 1x, refund ran 1x" in done.stdout
