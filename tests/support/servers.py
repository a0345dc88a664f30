"""Real Redis and PostgreSQL servers for the tests, started on loopback ports from the installed binaries.

``.ci/run`` installs them (apt-get). Without a binary a test is skipped locally and fails
under ``CI=true``: the shared stores are never silently left untested in CI.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from .server import free_port

__all__ = ["PostgresServer", "RedisServer", "missing", "wait_for_port"]


def missing(what: str) -> None:
    message = f"{what} is not installed: .ci/run installs it with apt-get"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _binary(name: str, *extra: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in extra:
        for candidate in sorted(Path("/").glob(folder.lstrip("/")), reverse=True):
            if (candidate / name).exists():
                return str(candidate / name)
    return None


class RedisServer:
    """``redis-server`` without persistence, on a free port; ``restart()`` keeps nothing (like a crash)."""

    def __init__(self) -> None:
        binary = _binary("redis-server") or _binary("valkey-server")
        if binary is None:
            missing("redis-server")
        self.binary = str(binary)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.password: str | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, *, password: str | None = None, keep_data: Path | None = None) -> RedisServer:
        """Start (or start again, with the same settings); ``keep_data`` keeps writes across restarts."""
        self.password = password if password is not None else self.password
        self.keep_data = keep_data if keep_data is not None else getattr(self, "keep_data", None)
        self.fsync = getattr(self, "fsync", "always")
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        if self.keep_data is None:
            args += ["--appendonly", "no"]
        else:  # an append-only file, fsynced on every write
            args += ["--appendonly", "yes", "--appendfsync", self.fsync, "--dir", str(self.keep_data)]
        password = self.password
        if password:
            args += ["--requirepass", password]
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self._process, "redis-server")
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self._process is not None:
            self._process.send_signal(sig)
            self._process.wait(timeout=20)
            self._process = None


class PostgresServer:
    """A PostgreSQL cluster in a temporary folder, on a free port, trusting local connections."""

    def __init__(self, *, password: str | None = None, durable: bool = False) -> None:
        """``password``: the ``postgres`` role's, required over TCP (scram); without it, trust.

        ``durable``: PostgreSQL's default fsync and synchronous commit (benchmarks); tests turn
        them off, since their data lives as long as the test."""
        self.durable = durable
        initdb = _binary("initdb", "/usr/lib/postgresql/*/bin")
        if initdb is None:
            missing("PostgreSQL (initdb)")
        self.bin = Path(str(initdb)).parent
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="agent-unit-pg-"))
        self.data = self.folder / "data"
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._process: subprocess.Popen[bytes] | None = None
        self._user = None
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            self._user = "nobody"
            os.chmod(self.folder, 0o777)
        auth = ["-A", "trust"]
        if password is not None:
            secret = self.folder / "password"
            secret.write_text(password)
            os.chmod(secret, 0o644)
            auth = ["--auth-host=scram-sha-256", "--auth-local=trust", f"--pwfile={secret}"]
            self.url = f"postgresql://postgres:{password}@127.0.0.1:{self.port}/postgres"
        subprocess.run(
            [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", *auth, "--no-sync"],
            check=True,
            stdout=subprocess.DEVNULL,
            user=self._user,
        )

    def start(self) -> PostgresServer:
        self._process = subprocess.Popen(
            [
                str(self.bin / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-h",
                "127.0.0.1",
                "-k",
                str(self.folder),
                *([] if self.durable else ["-c", "fsync=off", "-c", "synchronous_commit=off"]),
                *([] if self.durable else ["-c", "full_page_writes=off"]),
                "-c",
                "max_connections=200",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            user=self._user,
        )
        wait_for_port(self.port, self._process, "postgres")
        # An open port is not a ready server: until recovery ends it answers "the database system
        # is starting up", which a test would take for the error it is looking for.
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=5).close()
                return self
            except psycopg.OperationalError as exc:
                if "starting up" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self, sig: int = signal.SIGINT) -> None:
        if self._process is not None:
            self._process.send_signal(sig)
            self._process.wait(timeout=30)
            self._process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def wait_for_port(port: int, process: subprocess.Popen[bytes], what: str, timeout: float = 30) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before it listened on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not listen on {port} within {timeout} s") from None
            time.sleep(0.05)


_EMULATOR = """
import sys
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

# One request at a time: moto's backends are not safe under concurrent requests (a transaction
# could be half applied), and DynamoDB itself applies each transaction atomically.
app = DomainDispatcherApplication(create_backend_app)
make_server("127.0.0.1", int(sys.argv[1]), app, threaded=False, request_handler=MotoRequestHandler).serve_forever()
"""


class DynamoDBEmulator:
    """moto's DynamoDB emulator in server mode (real HTTP on a loopback port): an emulator, not AWS."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> DynamoDBEmulator:
        import sys

        self._process = subprocess.Popen(
            [sys.executable, "-c", _EMULATOR, str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port(self.port, self._process, "the DynamoDB emulator")
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=20)
            self._process = None
