"""``wrangler dev`` over a build, on free loopback ports, stopped and started again over the same local state."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from ...support import fetch
from ...support.server import free_port
from .runtime import Toolchain, for_dev, python_modules

SECRET = "s3cret"


class WranglerDev:
    """One built Worker served by ``wrangler dev``: ``start()``, ``stop()``, ``restart()``, ``log``."""

    def __init__(self, tools: Toolchain, output: Path, work: Path, dev_vars: dict[str, str]) -> None:
        self.tools = tools
        self.folder = work / "worker"
        shutil.copytree(output, self.folder, ignore=shutil.ignore_patterns("__pycache__"))
        self.config = for_dev(self.folder)
        self.requirements = python_modules(self.folder)
        self.dev_vars = {"AGENT_UNIT_SECRET": SECRET, **dev_vars}
        self.state = work / "state"  # the Durable Objects' and D1's local storage, kept across restarts
        self.logs = work / "logs"
        self.logs.mkdir()
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.starts = 0
        self.cold_start: list[float] = []  # seconds to each start's first answer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        """Everything every ``wrangler dev`` of this Worker printed so far."""
        return "".join(path.read_text(errors="replace") for path in sorted(self.logs.glob("*.log")))

    def start(self, *, probe: bool = True) -> None:
        """Start ``wrangler dev``; ``probe``: then send it a first request (else an alarm may be
        the new isolate's first event) and time it."""
        self.port = free_port()
        self.starts += 1
        # the Worker's own URL (a deployment sets it in `url`): where a run that yields on D1 continues
        values = {"AGENT_UNIT_URL": self.url, **self.dev_vars}
        (self.folder / ".dev.vars").write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        out = (self.logs / f"{self.starts:02d}.log").open("wb")
        command = [str(self.tools.node), str(self.tools.wrangler), "dev", "--ip", "127.0.0.1", "--port", str(self.port)]
        command += ["--inspector-port", str(free_port()), "--persist-to", str(self.state), "--log-level", "info"]
        env = {
            **os.environ,
            "PATH": f"{self.tools.node.parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "MINIFLARE_WORKERD_PATH": str(self.tools.workerd),
            "WRANGLER_SEND_METRICS": "false",
            "CI": "true",  # no interactive session, no prompts
            "HOME": str(self.folder.parent),  # wrangler's own config and caches stay in this test's folder
        }
        self.process = subprocess.Popen(
            command, cwd=self.folder, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        out.close()
        deadline = time.monotonic() + 120
        while "Ready on" not in (self.logs / f"{self.starts:02d}.log").read_text(errors="replace"):
            if self.process.poll() is not None:
                raise RuntimeError(f"wrangler dev exited ({self.process.returncode}):\n{self.log[-4000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"wrangler dev was not ready in 120 s:\n{self.log[-4000:]}")
            time.sleep(0.1)
        if probe:
            self.probe()

    def probe(self) -> None:
        """Wait for the Worker's first answer (``/healthz``) and record how long it took."""
        assert self.process is not None
        began = time.monotonic()  # the first request after the start: it loads Pyodide and the entry
        while True:
            try:
                fetch.get(self.url + "/healthz", timeout=180)
                break
            except httpx.TransportError:
                if self.process.poll() is not None or time.monotonic() > began + 180:
                    raise RuntimeError(f"the Worker did not answer:\n{self.log[-4000:]}") from None
                time.sleep(0.1)
        self.cold_start.append(time.monotonic() - began)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)  # wrangler, its workerd and the wrapper: one session
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # a workerd child that outlived wrangler

    def kill(self) -> None:
        """SIGKILL ``wrangler dev`` and its workerd at once, as a crash would: nothing gets to finish."""
        process, self.process = self.process, None
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def client(self, **kwargs: Any) -> httpx.Client:
        return fetch.Client(base_url=self.url, timeout=60, **kwargs)
