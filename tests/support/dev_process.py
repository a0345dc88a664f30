"""``agent-unit dev`` as a user runs it: a real process (and its worker) on a free port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .server import ROOT, free_port, wait_until_up


class DevProcess:
    """``agent-unit dev --root ROOT --port P ARGS...``, its console captured in a file."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = root.parent / f"dev-{self.port}.log"
        with self.log.open("wb") as console:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "agent_unit_cli", "dev", "--root", str(root), "--port", str(self.port), *args],
                stdout=console,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            )

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, count: int = 1, timeout: float = 60) -> str:
        """The console once ``text`` has appeared ``count`` times (the process must not end first)."""
        deadline = time.monotonic() + timeout
        while (output := self.output).count(text) < count:
            if self.process.poll() is not None:
                raise AssertionError(f"dev ended ({self.process.returncode}) before printing {text!r}:\n{output}")
            if time.monotonic() > deadline:
                raise AssertionError(f"dev did not print {text!r}:\n{output}")
            time.sleep(0.05)
        return output

    def up(self) -> DevProcess:
        self.wait_for("serving on")
        wait_until_up(self.url)
        return self

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal dev and wait for it to end (SIGKILL if it has not within 90 s); its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
