"""A real uvicorn process serving tests/support/server_app.py, which tests stop and start again."""

from __future__ import annotations

import itertools
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from . import fetch

ROOT = Path(__file__).resolve().parents[2]


_PORTS_FROM = 20_000  # below the range Linux hands out for outgoing connections (32768 and up)
_PORTS_EACH = 1_000  # ports of one test worker: gw0 from 20,000, gw1 from 21,000...
_next_port = itertools.count(random.randrange(_PORTS_EACH))  # a subprocess starts elsewhere in the block


def free_port() -> int:
    """A port free now on 127.0.0.1, from a block of ports of this test worker's own.

    A port the kernel picks for ``bind(("127.0.0.1", 0))`` and that is closed again can be taken
    by another worker's server or an outgoing connection before the server meant for it binds it:
    seen in CI, where a server failed to bind and its test talked to another test's server. Each
    worker takes ports from its own block, below the kernel's range for outgoing connections, and
    skips any that is in use.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    first = _PORTS_FROM + (int(worker) % 12 if worker.isdigit() else 0) * _PORTS_EACH
    for _ in range(_PORTS_EACH):
        port = first + next(_next_port) % _PORTS_EACH
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {first}-{first + _PORTS_EACH - 1}")


def wait_until_up(url: str, timeout: float = 30) -> dict[str, object]:
    """Poll ``GET {url}/agents`` until the server answers; its manifest."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fetch.get(f"{url}/agents", timeout=1).json()  # type: ignore[no-any-return]
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no server answered at {url}") from None
            time.sleep(0.05)


class Server:
    def __init__(self, store: str, *, env: dict[str, str] | None = None, log: Path | None = None) -> None:
        self.port = free_port()
        self.log = log  # where the server's stderr goes (default: the test's own)
        self.url = f"http://127.0.0.1:{self.port}"
        # The server's own URL, as a deployment configures it (the A2A card shows it).
        self._env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TEST_STORE": store,
            "AGENT_UNIT_URL": self.url,
            **(env or {}),
        }
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> Server:
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "tests.support.server_app:app",
                "--port",
                str(self.port),
                "--timeout-graceful-shutdown",
                "1",
                "--log-level",
                "warning",
            ],
            env=self._env,
            stderr=None if self.log is None else self.log.open("ab"),
        )
        wait_until_up(self.url)
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self._process is not None:
            self._process.send_signal(sig)
            self._process.wait(timeout=20)
            self._process = None

    def restart(self) -> None:
        self.stop()
        self.start()
