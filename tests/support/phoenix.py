"""Arize Phoenix, a real OpenTelemetry backend, run offline on loopback for a test or a script.

Phoenix's dependencies clash with the dev environment's, so it lives in an environment of its
own: ``.venv-phoenix`` at the repository's root (``make .venv-phoenix/.installed``), or the
``phoenix`` executable named by ``PHOENIX_BIN``. It takes OTLP over HTTP at ``/v1/traces`` and
returns a project's spans at ``GET /v1/projects/{project}/spans``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from .server import free_port

ROOT = Path(__file__).resolve().parents[2]


def phoenix_bin() -> Path | None:
    given = os.environ.get("PHOENIX_BIN")
    found = Path(given) if given else ROOT / ".venv-phoenix" / "bin" / "phoenix"
    return found if found.exists() else None


class Phoenix:
    def __init__(self, workdir: Path, executable: Path) -> None:
        self.workdir = workdir
        self.executable = executable
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / "phoenix.log"

    def start(self, timeout: float = 240.0) -> Phoenix:
        env = {
            **os.environ,
            "PHOENIX_WORKING_DIR": str(self.workdir),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(free_port()),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [str(self.executable), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"phoenix exited with {self.process.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"phoenix did not answer within {timeout:.0f} s: {self.log.read_text()[-2000:]}")
            time.sleep(0.5)

    def stop(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        except ProcessLookupError:
            pass
        self.process = None

    def spans(self, project: str = "default") -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        cursor = ""
        while True:
            query = "?limit=1000" + (f"&cursor={cursor}" if cursor else "")
            with urllib.request.urlopen(f"{self.url}/v1/projects/{project}/spans{query}", timeout=10) as response:
                page = json.loads(response.read())
            found += page["data"]
            cursor = page.get("next_cursor") or ""
            if not cursor:
                return found

    def __enter__(self) -> Phoenix:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
