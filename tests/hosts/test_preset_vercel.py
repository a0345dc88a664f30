"""``--preset vercel``: the output is what the real Vercel CLI builds, and it runs as Vercel runs it.

No Vercel account is reachable here, so neither a deploy nor ``vercel dev`` can run. What runs:

- ``vercel build`` itself (the CLI from npm, at the version the preset follows) on a tiny Python
  app: it needs no account, only PyPI and uv. Our output must match its function runtime, its
  handler and the runtime package it vendors, its routes and its crons.
- Our function, started the way Vercel's functions runtime starts one: a new Python process
  (the function's Python) imports the handler module with ``VERCEL_IPC_PATH`` set; the
  vendored ``vercel_runtime`` serves the app with uvicorn and reports its port on that socket.
  Two such instances share a real Redis; a run pauses on one and resumes on the other, a long
  run continues at the deployment's URL (a stand-in that hands each request to an instance),
  and a sleeping run is woken by the cron's request with ``Authorization: Bearer $CRON_SECRET``.

The npm install and uv are cached in the system temp folder, keyed by version.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_unit_cli.presets import vercel

from ..support import fetch
from ..support.serverless_agents import LONG, NAPPER

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in a subprocess: left out of `make check`

ROOT = Path(__file__).resolve().parents[2]
VERCEL_CLI = "58.10.0"  # whose @vercel/python pins the vendored runtime package (vercel.VERCEL_RUNTIME)
UV = "0.10.11"  # the uv that Vercel CLI's Python builder installs for itself
SECRET = "an-agent-unit-secret"
CRON_SECRET = "a-different-cron-secret"
FUNCTION = f"functions/{vercel.FUNCTION}.func"

TINY_APP = """
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route


async def echo(request):
    return JSONResponse({"path": request.url.path})


app = Starlette(routes=[Route("/{path:path}", echo, methods=["GET", "POST"])])
"""


def unavailable(what: str) -> None:
    """Skip here, fail in CI: the comparison with the real CLI is never silently left out there."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is missing in CI")
    pytest.skip(f"{what} is missing")


def _cached(name: str, install: Any) -> Path:
    """A folder in the system temp folder made once by ``install(folder)``, reused by later sessions."""
    final = Path(tempfile.gettempdir()) / name
    if (final / ".complete").exists():
        return final
    staging = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=final.parent))
    install(staging)
    (staging / ".complete").write_text("")
    try:
        staging.rename(final)
    except OSError:  # another session got there first (or a stale copy is in the way)
        if not (final / ".complete").exists():
            shutil.rmtree(final, ignore_errors=True)
            staging.rename(final)
        else:
            shutil.rmtree(staging, ignore_errors=True)
    return final


def _function_python() -> tuple[str, str] | None:
    """A CPython 3.12+ that runs (Vercel's runtime package needs 3.12): ``(executable, "3.X")``.

    On PATH, or one that pyenv keeps without it being the selected version.
    """
    for version in vercel.RUNTIMES:
        candidates = [shutil.which(f"python{version}")]
        if pyenv := shutil.which("pyenv"):
            prefix = subprocess.run([pyenv, "prefix", version], capture_output=True, text=True).stdout.strip()
            candidates.append(str(Path(prefix) / "bin" / f"python{version}") if prefix else None)
        for candidate in filter(None, candidates):
            ran = subprocess.run([candidate, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
            if ran.returncode == 0 and ran.stdout.strip():
                return ran.stdout.strip(), version
    return None


@pytest.fixture(scope="session")
def function_python() -> tuple[str, str]:
    found = _function_python()
    if found is None:
        unavailable("a Python 3.12+ interpreter (Vercel's runtime package needs one)")
    assert found is not None
    return found


@pytest.fixture(scope="session")
def vercel_cli() -> Path:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        unavailable("node and npm (to install the Vercel CLI)")
    assert npm is not None

    def install(folder: Path) -> None:
        subprocess.run(
            [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund", f"vercel@{VERCEL_CLI}"],
            check=True,
            capture_output=True,
            timeout=300,
        )

    return _cached(f"agent-unit-vercel-cli-{VERCEL_CLI}", install) / "node_modules" / ".bin" / "vercel"


@pytest.fixture(scope="session")
def toolbox(function_python: tuple[str, str]) -> Iterator[Path]:
    """A folder for PATH with the function's Python and uv (Vercel's Python builder needs both)."""
    uv = Path(sys.executable).parent / "uv"
    if not uv.exists():

        def install(folder: Path) -> None:
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(folder), f"uv=={UV}"],
                check=True,
                capture_output=True,
                timeout=300,
            )

        uv = _cached(f"agent-unit-uv-{UV}", install) / "bin" / "uv"
    folder = Path(tempfile.mkdtemp(prefix="agent-unit-vercel-bin-"))
    (folder / "uv").symlink_to(uv)
    executable, version = function_python
    (folder / f"python{version}").symlink_to(executable)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def build_ours(tmp: Path, storage: str, python: str) -> tuple[Path, str]:
    """The refund example (plus a sleeper and a long run) built with ``agent-unit build --preset vercel``."""
    project = tmp / "project"
    shutil.copytree(ROOT / "examples" / "refund", project, ignore=shutil.ignore_patterns(".output", ".agent-unit"))
    (project / "agents" / "napper.py").write_text(NAPPER)
    (project / "agents" / "long.py").write_text(LONG)
    (project / "agent-unit.toml").write_text(f'name = "refund"\nstorage = "{storage}"\n')
    done = subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "build", "--preset", "vercel", "--python", python],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return project / ".vercel" / "output", done.stdout


def build_with_vercel(tmp: Path, cli: Path, toolbox: Path) -> Path:
    """``vercel build`` on a tiny Python app with the sweep's cron: the CLI's own output."""
    project = tmp / "tiny"
    (project / ".vercel").mkdir(parents=True)
    (project / "main.py").write_text(TINY_APP)
    (project / "requirements.txt").write_text(f"starlette=={_version('starlette')}\n")
    crons = vercel.crons("* * * * *", "/")
    (project / "vercel.json").write_text(json.dumps({"crons": crons}))
    settings = {"projectId": "prj_local", "orgId": "team_local", "settings": {"framework": "python"}}
    (project / ".vercel" / "project.json").write_text(json.dumps(settings))
    home = tmp / "home"
    home.mkdir()
    env = {
        **os.environ,  # the machine's own settings for reaching PyPI
        "PATH": f"{toolbox}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        "VERCEL_TELEMETRY_DISABLED": "1",
        "NO_UPDATE_NOTIFIER": "1",
    }
    done = subprocess.run(
        [str(cli), "build", "--standalone", "--yes"], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return project / ".vercel" / "output"


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def _only_function(output: Path) -> Path:
    functions = sorted(output.glob("functions/*.func"))
    assert len(functions) == 1, functions
    return functions[0]


def _main_routes(routes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The routes outside the error phase (the CLI's 404 page for a static site of none)."""
    kept, phase = [], None
    for route in routes:
        phase = route.get("handle", phase)
        if phase != "error":
            kept.append(route)
    return kept


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory, redis_server: Any, function_python: tuple[str, str]) -> Path:
    output, printed = build_ours(tmp_path_factory.mktemp("vercel-ours"), redis_server.url, function_python[1])
    said = " ".join(printed.split())
    assert "next: vercel deploy --prebuilt" in said
    assert "wrote: config.json, functions/agent-unit.func/.vc-config.json" in said
    return output


def test_the_output_matches_what_vercel_build_makes(
    ours: Path, vercel_cli: Path, toolbox: Path, tmp_path: Path, function_python: tuple[str, str]
) -> None:
    theirs = build_with_vercel(tmp_path, vercel_cli, toolbox)
    their_function, our_function = _only_function(theirs), ours / FUNCTION
    their_config = json.loads((their_function / ".vc-config.json").read_text())
    our_config = json.loads((our_function / ".vc-config.json").read_text())
    # the runtime and the handler convention
    assert their_config["runtime"] == our_config["runtime"] == f"python{function_python[1]}"
    assert their_config["handler"] == our_config["handler"] == "vc__handler__python.vc_handler"
    for key in ("architecture", "supportsResponseStreaming"):
        assert their_config[key] == our_config[key], key
    # the same runtime package, at the same version, where each function's PYTHONPATH points
    for function, config in ((their_function, their_config), (our_function, our_config)):
        vendor = function / config["environment"]["PYTHONPATH"]
        assert (vendor / "vercel_runtime" / "vc_init.py").is_file(), function
        assert [path.name for path in vendor.glob("vercel_runtime-*.dist-info")] == [
            f"{vercel.VERCEL_RUNTIME.replace('-', '_').replace('==', '-')}.dist-info"
        ]
    # the handler module hands over to vercel_runtime the same way, with the same variables
    stubs = [(function / "vc__handler__python.py").read_text() for function in (their_function, our_function)]
    their_variables, our_variables = (set(re.findall(r'"(__VC_[A-Z_]+)"', stub)) for stub in stubs)
    assert their_variables == our_variables and "__VC_HANDLER_ENTRYPOINT_ABS" in our_variables
    handover = "from vercel_runtime.vc_init import vc_handler"
    assert all(stub.rstrip().splitlines()[-1].startswith(handover) for stub in stubs)
    # routes: every request to the one function, with its path; the sweep's cron
    their_output, our_output = (json.loads((out / "config.json").read_text()) for out in (theirs, ours))
    assert their_output["version"] == our_output["version"] == 3
    their_routes = json.dumps(_main_routes(their_output["routes"])).replace(f'"/{their_function.stem}"', '"/F"')
    assert json.loads(their_routes) == json.loads(json.dumps(our_output["routes"]).replace('"/agent-unit"', '"/F"'))
    assert their_output["crons"] == our_output["crons"] == [{"path": "/__agent-unit/sweep", "schedule": "* * * * *"}]


class Instance:
    """One function instance, started as Vercel's functions runtime starts it (see the module's docstring)."""

    def __init__(self, folder: Path, python: str, env: dict[str, str], *, prelude: str = "") -> None:
        self.folder = folder
        self.python = python
        self.prelude = prelude  # code run before the handler module is imported
        config = json.loads((folder / ".vc-config.json").read_text())
        self.env = {"PATH": os.environ["PATH"], **config["environment"], **env}
        self.messages: list[tuple[float, dict[str, Any]]] = []
        self.url = ""

    def start(self) -> Instance:
        self._dir = tempfile.mkdtemp(prefix="vc-ipc-")  # short: a socket path has ~100 characters at most
        path = os.path.join(self._dir, "ipc.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        listener.settimeout(60)
        self.process = subprocess.Popen(
            [self.python, "-c", self.prelude + "\nimport vc__handler__python"],
            cwd=self.folder,
            env={**self.env, "VERCEL_IPC_PATH": path},
        )
        self._conn, _ = listener.accept()
        listener.close()
        started = threading.Event()
        threading.Thread(target=self._read, args=(started,), daemon=True).start()
        assert started.wait(60), self.logs()
        return self

    def _read(self, started: threading.Event) -> None:
        buffer = b""
        while data := self._conn.recv(65536):
            buffer += data
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                self.messages.append((time.monotonic(), message))
                if message["type"] == "server-started":
                    self.url = f"http://127.0.0.1:{message['payload']['httpPort']}"
                    started.set()

    def logs(self) -> str:
        return "".join(
            base64.b64decode(message["payload"]["message"]).decode(errors="replace")
            for _, message in self.messages
            if message["type"] == "log"
        )

    def ended(self, request_id: int) -> float | None:
        """When the runtime told the platform that this request's invocation ended."""
        for at, message in self.messages:
            if message["type"] == "end" and message["payload"]["context"]["requestId"] == request_id:
                return at
        return None

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)
        self._conn.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class Deployment:
    """The deployment's own URL: each request goes to one of its live instances, in turn."""

    def __init__(self) -> None:
        self.instances: list[Instance] = []
        self.continued: list[str] = []
        deployment = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path.endswith("/__agent-unit/continue"):
                    deployment.continued.append(json.loads(body)["run_id"])
                target = deployment.instances[len(deployment.continued) % len(deployment.instances)]
                headers = {"authorization": self.headers.get("authorization", ""), "content-type": "application/json"}
                response = fetch.post(f"{target.url}{self.path}", content=body, headers=headers, timeout=120)
                self.send_response(response.status_code)
                self.end_headers()
                self.wfile.write(response.content)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def deployment(ours: Path, redis_url: str, function_python: tuple[str, str], tmp_path: Path) -> Iterator[Deployment]:
    """Two instances of our function over one Redis, behind the deployment's URL."""
    site = Deployment()
    env = {
        "AGENT_UNIT_STORAGE": redis_url,
        "AGENT_UNIT_SECRET": SECRET,
        "CRON_SECRET": CRON_SECRET,
        "AGENT_UNIT_URL": site.url,
        "AGENT_UNIT_BUDGET": "1s",
        "REFUND_LEDGER": str(tmp_path / "ledger.jsonl"),
    }
    try:
        for _ in range(2):
            site.instances.append(Instance(ours / FUNCTION, function_python[0], env).start())
        yield site
    finally:
        for instance in site.instances:
            instance.stop()
        site.close()


def _wait_for(url: str, run_id: str, *statuses: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while (record := fetch.get(f"{url}/runs/{run_id}").json())["status"] not in statuses:
        assert time.monotonic() < deadline, record
        time.sleep(0.1)
    return record  # type: ignore[no-any-return]


def test_a_run_pauses_on_one_instance_and_resumes_on_another(deployment: Deployment, tmp_path: Path) -> None:
    first, second = deployment.instances
    with fetch.stream(
        "POST",
        f"{first.url}/agents/refund/runs",
        json={"input": {"order_id": "o_1"}},
        headers={"accept": "text/event-stream"},
        timeout=30,
    ) as stream:  # the runtime streams: the events arrive until the run parks
        events = [json.loads(line[5:]) for line in stream.iter_lines() if line.startswith("data:")]
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_INTERRUPTED"
    run_id = events[0]["runId"]
    resumed = fetch.post(f"{second.url}/runs/{run_id}/resume", json={"answer": {"approved": True}}, timeout=30)
    assert resumed.status_code == 202, resumed.text
    done = _wait_for(second.url, run_id, "completed", "failed")
    assert done["output"] == "refunded", first.logs() + second.logs()
    calls = [json.loads(line)["call"] for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert calls == ["load_order", "refund"]  # each effect once, across two instances


def test_an_invocation_stays_open_until_its_run_parks_and_a_long_run_continues_at_the_deployment(
    deployment: Deployment,
) -> None:
    first, _ = deployment.instances
    started = fetch.post(
        f"{first.url}/agents/long/runs", json={"input": 10}, headers={"x-vercel-internal-request-id": "7"}, timeout=30
    )
    answered = time.monotonic()
    assert started.status_code == 202
    run_id = started.json()["id"]
    done = _wait_for(first.url, run_id, "completed", "failed", timeout=90)
    assert done["output"] == sum(range(10)), first.logs()
    ended = first.ended(7)
    # answered at once, yet the invocation lasted the whole 1 s slice: the instance was not left to freeze
    assert ended is not None and ended - answered > 0.9
    # 3 s of work in 1 s slices: continued at the deployment's URL, in other invocations, twice or more
    assert deployment.continued.count(run_id) >= 2


def test_the_cron_request_wakes_a_run_whose_instance_is_gone(deployment: Deployment) -> None:
    first, second = deployment.instances
    run_id = fetch.post(f"{first.url}/agents/napper/runs", json={"input": "well"}, timeout=30).json()["id"]
    _wait_for(first.url, run_id, "sleeping")
    first.stop()  # the instance that armed a timer for it is gone (frozen, recycled)
    deployment.instances.remove(first)
    time.sleep(1.2)
    sweep = f"{second.url}/__agent-unit/sweep"
    assert fetch.get(sweep, headers={"authorization": "Bearer wrong"}).status_code == 401
    assert fetch.get(sweep).status_code == 401
    woken = fetch.get(sweep, headers={"authorization": f"Bearer {CRON_SECRET}", "user-agent": "vercel-cron/1.0"})
    assert woken.json() == {"woken": 1, "recovered": 0, "deleted": 0}, second.logs()
    done = fetch.get(f"{second.url}/runs/{run_id}").json()
    assert done["status"] == "completed" and done["output"] == "rested well"
    assert fetch.post(sweep, headers={"authorization": f"Bearer {SECRET}"}).status_code == 200  # ours works too


# Run before the handler module: OpenTelemetry's SDK (this test's, after the function's own
# packages) configured the way an app does, batching spans for ten minutes, so only a flush exports
# them in time; each exported span is written with the time it was exported (CLOCK_MONOTONIC,
# the clock the test reads the invocation's end by).
OTEL_PRELUDE = """
import json, sys, time
sys.path.append({purelib!r})
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class Exported(SpanExporter):
    def export(self, spans):
        with open({path!r}, "a") as f:
            for span in spans:
                f.write(json.dumps({{"name": span.name, "at": time.monotonic()}}) + "\\n")
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(Exported(), schedule_delay_millis=600_000))
trace.set_tracer_provider(provider)
"""


def test_a_runs_spans_are_exported_before_its_invocation_ends(
    ours: Path, redis_url: str, function_python: tuple[str, str], tmp_path: Path
) -> None:
    spans = tmp_path / "spans.jsonl"
    prelude = OTEL_PRELUDE.format(purelib=sysconfig.get_paths()["purelib"], path=str(spans))
    env = {"AGENT_UNIT_STORAGE": redis_url, "AGENT_UNIT_SECRET": SECRET, "REFUND_LEDGER": str(tmp_path / "ledger")}
    instance = Instance(ours / FUNCTION, function_python[0], env, prelude=prelude).start()
    try:
        started = fetch.post(
            f"{instance.url}/agents/refund/runs",
            json={"input": {"order_id": "o_1"}},
            headers={"x-vercel-internal-request-id": "9"},
            timeout=30,
        )
        assert started.status_code == 202, started.text
        deadline = time.monotonic() + 30
        while (ended := instance.ended(9)) is None:
            assert time.monotonic() < deadline, instance.logs()
            time.sleep(0.05)
        exported = [json.loads(line) for line in spans.read_text().splitlines()] if spans.exists() else []
    finally:
        instance.stop()
    assert sorted(span["name"] for span in exported) == ["run refund", "step load-order"], instance.logs()
    assert max(span["at"] for span in exported) < ended  # exported before the instance could be frozen


EVENTS = """
import base64, json, sys
from vc__handler__python import vc_handler


def call(method, path, body=None):
    payload = {"method": method, "path": path, "headers": {"host": "fn", "content-type": "application/json"}}
    if body is not None:
        payload["body"] = json.dumps(body)
    response = vc_handler({"body": json.dumps(payload)}, None)
    text = base64.b64decode(response.get("body", "")).decode()
    return response["statusCode"], json.loads(text) if text else None

status, run = call("POST", "/agents/refund/runs", {"input": {"order_id": "o_9"}})
print(json.dumps([status, run["status"], call("GET", "/runs/" + run["id"])[1]["status"]]))
"""


def test_the_function_carries_bytecode_for_its_python(ours: Path, function_python: tuple[str, str]) -> None:
    """Vercel's function files are read-only: without bytecode beside them every cold start compiles
    every module it imports (the refund function took 1.1 to 1.5 s to import here, 0.35 with it). The
    function's Python is rarely the one running the build: it is found on the PATH or kept by pyenv."""
    tag = "cpython-" + function_python[1].replace(".", "")
    function = ours / FUNCTION
    for module in (
        "vc__handler__python.py",
        "agent_unit_app.py",
        "app/agents/refund.py",
        "vendor/agent_unit/_engine.py",
    ):
        source = function / module
        compiled = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        assert compiled.is_file(), module
        assert int.from_bytes(compiled.read_bytes()[4:8], "little") == 0b01, module  # hash-based, never checked


def test_without_the_ipc_socket_the_handler_takes_events(
    ours: Path, redis_url: str, function_python: tuple[str, str], tmp_path: Path
) -> None:
    """The runtime's other mode: ``vc_handler(event, context)``, one event at a time in one process."""
    folder = ours / FUNCTION
    config = json.loads((folder / ".vc-config.json").read_text())
    env = {"PATH": os.environ["PATH"], **config["environment"], "AGENT_UNIT_STORAGE": redis_url}
    env["REFUND_LEDGER"] = str(tmp_path / "ledger.jsonl")
    done = subprocess.run(
        [function_python[0], "-c", EVENTS], cwd=folder, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # answered as soon as the run was started; the event ended once the run had parked
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [202, "running", "interrupted"]


@pytest.mark.parametrize(
    ("config", "args", "message"),
    [
        ('storage = "sqlite:///runs.db"\n', [], "needs storage that every invocation shares, not sqlite"),
        ('storage = "redis://cache:6379"\n', ["--python", "3.11"], "--python 3.11: Vercel's Python runtime needs"),
        ('storage = "redis://cache:6379"\n', ["--arch", "arm64"], "--arch arm64: Vercel's Python functions run on"),
    ],
)
def test_the_build_refuses_what_vercel_cannot_run(tmp_path: Path, config: str, args: list[str], message: str) -> None:
    (tmp_path / "agents").mkdir()
    shutil.copy(ROOT / "examples" / "refund" / "agents" / "refund.py", tmp_path / "agents")
    (tmp_path / "agent-unit.toml").write_text(config)
    done = subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "build", "--preset", "vercel", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and message in " ".join((done.stdout + done.stderr).split())
    assert not (tmp_path / ".vercel").exists()


def test_crons_follow_the_sweep_setting_and_the_base_path() -> None:
    assert vercel.crons(False, "/") == []
    assert vercel.crons("*/5 * * * *", "/api/agents/") == [
        {"path": "/api/agents/__agent-unit/sweep", "schedule": "*/5 * * * *"}
    ]


def test_the_deployment_url_is_configured_or_vercels_never_a_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_unit.hosts.vercel import deployment_url

    for name in ("AGENT_UNIT_URL", "VERCEL_ENV", "VERCEL_URL", "VERCEL_PROJECT_PRODUCTION_URL"):
        monkeypatch.delenv(name, raising=False)
    assert deployment_url() is None
    monkeypatch.setenv("VERCEL_URL", "app-git-x.vercel.app")
    monkeypatch.setenv("VERCEL_PROJECT_PRODUCTION_URL", "app.example.com")
    assert deployment_url() == "https://app-git-x.vercel.app"  # a preview continues on its own code
    monkeypatch.setenv("VERCEL_ENV", "production")
    assert deployment_url() == "https://app.example.com"
    assert deployment_url("https://agents.example.com/") == "https://agents.example.com"
    monkeypatch.setenv("AGENT_UNIT_URL", "https://override.example.com")
    assert deployment_url("https://agents.example.com") == "https://override.example.com"


async def test_one_secret_is_enough_and_the_cron_may_use_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_unit import define_agent
    from agent_unit.hosts.vercel import create_app

    @define_agent
    async def agent(input: str) -> str:
        return input

    async def sweep(authorization: str, method: str = "GET") -> int:
        app = create_app({"echo": agent}, store="memory://", base_path="/api")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://function") as client:
            response = await client.request(method, "/api/__agent-unit/sweep", headers={"authorization": authorization})
        return response.status_code

    monkeypatch.delenv("AGENT_UNIT_SECRET", raising=False)
    monkeypatch.setenv("CRON_SECRET", CRON_SECRET)
    assert await sweep(f"Bearer {CRON_SECRET}") == 200  # CRON_SECRET alone guards the internal routes
    assert await sweep(f"Bearer {CRON_SECRET}", "POST") == 200
    monkeypatch.setenv("AGENT_UNIT_SECRET", SECRET)
    assert await sweep(f"Bearer {CRON_SECRET}") == 200  # the cron's own secret, on the sweep only
    assert await sweep(f"Bearer {SECRET}") == 200
    assert await sweep("Bearer wrong") == 401
    monkeypatch.delenv("CRON_SECRET")
    assert await sweep(f"Bearer {CRON_SECRET}") == 401


async def test_a_deployment_is_served_at_any_of_its_vercel_domains(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_unit import define_agent
    from agent_unit.hosts.vercel import create_app

    @define_agent
    async def agent(input: str) -> str:
        return input

    monkeypatch.setenv("VERCEL_URL", "app-abc123.vercel.app")
    app = create_app({"echo": agent}, store="memory://", url="https://agents.example.com")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://agents.example.com") as http:
        for host in ["agents.example.com", "app-abc123.vercel.app", "app-git-main-team.vercel.app", "www.example.com"]:
            page = {"host": host, "origin": f"https://{host}"}  # the inbox, served where it is reached
            started = await http.post("/agents/echo/runs?wait=1", json={"input": "hi"}, headers=page)
            assert started.status_code == 200 and started.json()["output"] == "hi", host
