"""One agents/ folder, every host: build each preset and run every agent the way its host runs it.

    python examples/universal/matrix.py                      # every host, every agent
    python examples/universal/matrix.py --hosts server,aws-lambda --agents plain,with_langgraph

For each host: ``agent-unit build --preset P`` of a copy of this folder, then for each agent:
start a run (it pauses for approval), restart the host, check the run is still parked, answer,
see it complete, and read the effects file: no side effect and no model call ran twice.

How each host is run here (as ``tests/hosts/test_preset_*.py`` run them):

- server: the build moved elsewhere, ``python -I -S main.py``; the restart is a new process.
- docker: no Docker engine here: the image's CMD (``python main.py``) with its ENV, run from
  the build folder by a bare Python (``-I -S``), as the image's slim Python would.
- aws-lambda: function.zip unpacked; a container is a ``python -I -S`` process that imports the
  handler once and calls ``handler.handler(event, None)`` with HTTP API events one after another
  (a warm container, as Lambda reuses one); the restart ends it: the next request is a cold start.
- vercel: the function started as Vercel's functions runtime starts one (Python 3.12+, the
  vendored ``vercel_runtime`` reporting its port over ``VERCEL_IPC_PATH``); restart = new instance.
- netlify: built (its redirects proxy to the server build); Netlify's proxy cannot run here.
- cloudflare: real workerd, as ``tests/hosts/workerd`` runs it: ``wrangler dev`` (Node 22 and
  wrangler installed from npm into a cache, and a Pyodide bundle, ``$AGENT_UNIT_WORKERD_PYTHON``);
  the restart is a new ``wrangler dev`` over the same local Durable Objects state. Without npm or
  the bundle its cells say so and are not run.

Every host but cloudflare shares one store, a Redis server this script starts (``redis-server`` on
PATH): serverless builds refuse a file store. The cloudflare build keeps each run in its own Durable
Object (no storage): with ``--hosts cloudflare`` alone no Redis is started. Exit status 0 only if
every cell that runs passes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SECRET = "a-matrix-secret-of-some-length"


@dataclass(frozen=True)
class Case:
    """How to start one agent, answer its interrupt, and which effect must run exactly once."""

    framework: str
    input: Any
    answer: Any
    effect: str  # the prefix of the line its side effect writes
    model: bool  # whether it calls a (scripted) model


AGENTS = {
    "plain": Case("plain Python", "o_1", {"approved": True}, "refund ", False),
    "with_pydantic_ai": Case("PydanticAI", "refund o_1", True, "refund ", True),
    "with_openai_agents": Case("OpenAI Agents SDK", "refund o_1", True, "refund ", True),
    "with_langgraph": Case("LangGraph", {"items": ["o_1"]}, True, "charge ", False),
    "with_google_adk": Case("Google ADK", "refund o_1", True, "refund ", True),
    "with_agent_framework": Case("Microsoft Agent Framework", "refund o_1", True, "refund ", True),
}
# Strands Agents pins an older MCP SDK than agent-unit's dev tools: it lives in its own
# environment (make test runs its adapter tests there) and has no row here.
NOT_HERE = {"strands": "own venv (.venv-strands): not in this matrix"}

HOSTS = ("server", "docker", "aws-lambda", "vercel", "netlify", "cloudflare")
# Hosts that cannot run here: the cell's label, and the note under the table.
LABELS = {"netlify": "proxy: not run here"}
NOTES = {
    "netlify": "built with --origin; Netlify's proxy cannot run here (the backend it proxies is the server build)",
    "cloudflare": "run in real workerd (wrangler dev over the Pyodide bundle, as tests/hosts/workerd runs it)",
}
NO_WORKERD = "not run: no workerd"
"""The cloudflare cells where npm or the Pyodide bundle is missing (the note under the table says how to get both)."""


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


# -- hosts ------------------------------------------------------------------------------------


class Host:
    """A built host: ``start``, ``restart``, ``stop`` and ``request(method, path, body)`` -> (status, json)."""

    def start(self) -> None: ...
    def stop(self) -> None: ...

    def restart(self) -> None:
        self.stop()
        self.start()

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        raise NotImplementedError


class Process(Host):
    """A long-lived server process (server, docker's CMD) at a free port."""

    def __init__(self, command: list[str], folder: Path, env: dict[str, str]) -> None:
        self.command, self.folder, self.port = command, folder, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **env,
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
            "LOG_LEVEL": "warning",
            "AGENT_UNIT_URL": self.url,
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, cwd=self.folder, env=self.env)
        # one client for the whole wait: each new one loads the CA bundle (~50 ms of CPU), which a
        # poll every 0.1 s would spend beside the server it waits for
        with httpx.Client(timeout=2) as http:
            wait_for(lambda: http.get(f"{self.url}/healthz").status_code == 200, 300, "the server to start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        response = httpx.request(method, self.url + path, json=body, timeout=120)
        return response.status_code, response.json()


class Lambda(Host):
    """The unpacked function in Lambda's containers (``tests/support/lambda_containers.Function``):
    each a ``python -I -S`` process that imports the handler once and calls it with HTTP API events
    one after another (a warm container); a restart ends them, so the next request is a cold start
    in a new process."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        sys.path.insert(0, str(ROOT))
        from tests.support.lambda_containers import Function

        self.function = Function(folder, env, timeout=300)  # a cold start imports every framework

    def stop(self) -> None:
        self.function.restart()

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        raw_path, _, query = path.partition("?")
        domain = "abc123.execute-api.eu-west-1.amazonaws.com"
        event = {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": raw_path,
            "rawQueryString": query,
            "headers": {"content-type": "application/json", "host": domain},
            "requestContext": {
                "domainName": domain,
                "http": {"method": method, "path": raw_path, "protocol": "HTTP/1.1", "sourceIp": "198.51.100.7"},
                "requestId": f"req-{time.monotonic_ns()}",
                "routeKey": "$default",
                "stage": "$default",
            },
            "body": None if body is None else json.dumps(body),
            "isBase64Encoded": False,
        }
        answer = self.function.invoke(event)
        return answer["statusCode"], json.loads(answer.get("body") or "null")


class Vercel(Host):
    """A function instance started as Vercel's runtime starts one (``tests/hosts/test_preset_vercel.Instance``)."""

    def __init__(self, folder: Path, python: str, env: dict[str, str]) -> None:
        sys.path.insert(0, str(ROOT))
        from tests.hosts.test_preset_vercel import Instance

        class SlowInstance(Instance):
            """``Instance.start`` with 300 s to start: the function imports every framework from
            source (Vercel sets ``PYTHONDONTWRITEBYTECODE``), 15 s of CPU, minutes on a busy machine."""

            def start(self) -> Instance:
                import socket
                import threading

                self._dir = tempfile.mkdtemp(prefix="vc-ipc-")
                path = os.path.join(self._dir, "ipc.sock")
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listener.bind(path)
                listener.listen(1)
                listener.settimeout(300)
                command = [self.python, "-c", "import vc__handler__python"]
                self.process = subprocess.Popen(command, cwd=self.folder, env={**self.env, "VERCEL_IPC_PATH": path})
                self._conn, _ = listener.accept()
                listener.close()
                started = threading.Event()
                threading.Thread(target=self._read, args=(started,), daemon=True).start()
                if not started.wait(300):
                    raise RuntimeError(f"the Vercel function did not start: {self.logs()[-1000:]}")
                return self

        self.instance = SlowInstance(folder, python, env)
        self.running = False

    def start(self) -> None:
        self.instance.start()
        self.running = True

    def stop(self) -> None:
        if self.running:
            self.instance.stop()
            self.running = False

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"x-vercel-internal-request-id": str(time.monotonic_ns())}
        response = httpx.request(method, self.instance.url + path, json=body, headers=headers, timeout=120)
        return response.status_code, response.json()


class Workerd(Host):
    """The built Worker in real workerd: ``wrangler dev`` as the tests run it (``tests/hosts/workerd``:
    Node 22, wrangler and the Pyodide bundle), the Durable Objects' local state kept across a restart.

    The agents print their effects in a Worker (``effects.py``): each answer copies the lines the
    Worker's log gained into the effects file.
    """

    def __init__(self, output: Path, work: Path, effects: Path, warnings: list[str]) -> None:
        sys.path.insert(0, str(ROOT))
        from tests.hosts.workerd.dev import WranglerDev
        from tests.hosts.workerd.runtime import toolchain

        self.dev = WranglerDev(toolchain(), output, work, {"AGENT_UNIT_SECRET": SECRET})
        self.effects, self.copied = effects, 0
        self.warnings = warnings  # the build's: packages that may have no Pyodide build

    def start(self) -> None:
        self.dev.start()

    def stop(self) -> None:
        if self.dev.process is not None:
            self.copy_effects()
            self.dev.stop()

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        response = httpx.request(method, self.dev.url + path, json=body, timeout=120)
        self.copy_effects()
        if not response.headers.get("content-type", "").startswith("application/json"):
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        return response.status_code, response.json()

    def copy_effects(self) -> None:
        from effects import PREFIX

        plain = re.sub(r"\x1b\[[0-9;]*m", "", self.dev.log)  # wrangler colours what a Worker prints to stderr
        printed = [line.partition(PREFIX)[2].strip() for line in plain.splitlines() if PREFIX in line]
        with self.effects.open("a") as out:
            out.writelines(line + "\n" for line in printed[self.copied :])
        self.copied = len(printed)

    def log_tail(self) -> str:
        return re.sub(r"\x1b\[[0-9;]*m", "", self.dev.log)[-6000:]

    def uncaught(self) -> str | None:
        """The first line of the Worker's log that says ``Uncaught``: a passing run has none."""
        return next((line for line in self.dev.log.splitlines() if "Uncaught" in line), None)


# -- the flow -----------------------------------------------------------------------------------


def run_case(host: Host, name: str, case: Case, effects: Path) -> str:
    """Start, pause, restart the host, resume, complete; "ok" or what went wrong."""
    before = len(lines(effects))
    status, run = host.request("POST", f"/agents/{name}/runs?wait=1", {"input": case.input})
    if status >= 300 or run.get("status") != "interrupted":
        return f"start: {status} {json.dumps(run)[:200]}"
    host.restart()
    status, parked = host.request("GET", f"/runs/{run['id']}")
    if parked.get("status") != "interrupted":
        return f"after the restart: {parked.get('status')}"
    status, resumed = host.request("POST", f"/runs/{run['id']}/resume?wait=1", {"answer": case.answer})
    if status >= 300:
        return f"resume: {status} {json.dumps(resumed)[:200]}"
    deadline = time.monotonic() + 120
    while (record := host.request("GET", f"/runs/{run['id']}")[1])["status"] != "completed":
        if record["status"] in ("failed", "cancelled") or time.monotonic() > deadline:
            return f"not completed: {record['status']} {json.dumps(record.get('error'))[:200]}"
        time.sleep(0.5)
    mine = lines(effects)[before:]
    repeated = sorted(line for line, count in Counter(mine).items() if count > 1)
    if repeated:
        return f"repeated: {repeated}"
    done = [line for line in mine if line.startswith(case.effect)]
    if len(done) != 1:
        return f"effect {case.effect.strip()!r} ran {len(done)}x"
    if case.model and not any(line.startswith("model ") for line in mine):
        return "no model call recorded"
    return "ok"


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


# -- builds ------------------------------------------------------------------------------------


def build(project: Path, preset: str, *args: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "agent_unit_cli", "build", "--root", str(project), "--preset", preset, "--json"]
    done = subprocess.run([*command, *args], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"build --preset {preset} failed: {done.stdout[-1500:]}{done.stderr[-1500:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def host_for(preset: str, project: Path, work: Path, env: dict[str, str]) -> Host:
    """Build ``preset`` and return the host that runs the build (moved out of the project first)."""
    python = [sys.executable, "-I", "-S", "main.py"]
    if preset == "server":
        build(project, "server")
        moved = shutil.copytree(project / ".output" / "server", work / "server")
        return Process(python, moved, env)
    if preset == "docker":
        build(project, "docker")
        moved = shutil.copytree(project / ".output" / "docker", work / "docker")
        return Process(python, moved, {**env, **dockerfile_env(moved / "Dockerfile")})
    if preset == "aws-lambda":
        build(project, "aws-lambda")
        with zipfile.ZipFile(project / ".output" / "aws-lambda" / "function.zip") as archive:
            archive.extractall(work / "function")
        return Lambda(work / "function", env)
    if preset == "vercel":
        sys.path.insert(0, str(ROOT))
        from tests.hosts.test_preset_vercel import FUNCTION, _function_python

        found = _function_python()
        if found is None:
            raise RuntimeError("no Python 3.12+ here: Vercel's runtime needs one")
        build(project, "vercel", "--python", found[1])
        moved = shutil.copytree(project / ".vercel" / "output", work / "vercel")
        return Vercel(moved / FUNCTION, found[0], env)
    if preset == "cloudflare":
        own = work / "project-cloudflare"  # each run in its own Durable Object: no storage to set
        shutil.copytree(project, own)
        (own / "agent-unit.toml").write_text('name = "universal"\n')
        warnings = [str(warning) for warning in build(own, "cloudflare").get("warnings", []) if "Pyodide" in warning]
        return Workerd(own / ".output" / "cloudflare", work / "workerd", Path(env["EFFECTS_FILE"]), warnings)
    raise ValueError(preset)


def dockerfile_env(dockerfile: Path) -> dict[str, str]:
    """The ``ENV`` of the image (``KEY=value`` pairs), and a check that its CMD is ``python main.py``."""
    text = dockerfile.read_text()
    assert 'CMD ["python", "main.py"]' in text, "the image's CMD changed: run it as it says"
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(pair.split("=", 1) for pair in line[4:].split())  # type: ignore[misc]
    return env


# -- helpers -----------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if check():
                return
        except (httpx.HTTPError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


def start_redis(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("error: redis-server is not on PATH (apt install redis-server): the hosts share a Redis")
    port = free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(folder)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    import socket

    def up() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True

    wait_for(up, 30, "redis-server")
    return process, f"redis://127.0.0.1:{port}"


def table(
    results: dict[tuple[str, str], str], hosts: list[str], agents: list[str], warned: dict[str, list[str]]
) -> str:
    rows = [["framework (agent)", *hosts]]
    for name in agents:
        rows.append([f"{AGENTS[name].framework} ({name})", *(results.get((host, name), "-") for host in hosts)])
    for name, why in NOT_HERE.items():
        rows.append([f"Strands Agents ({name})", *([why] + [""] * (len(hosts) - 1))])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    out.insert(1, "-+-".join("-" * width for width in widths))
    notes = [f"{host}: {NOTES[host]}" for host in hosts if host in NOTES]
    notes += [f"{host} build warns: {warning}" for host, warnings in warned.items() for warning in warnings]
    return "\n".join([*out, "", *notes])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", default=",".join(HOSTS), help="comma-separated presets")
    parser.add_argument("--agents", default=",".join(AGENTS), help="comma-separated agents")
    options = parser.parse_args(argv)
    hosts = [host for host in options.hosts.split(",") if host]
    agents = [agent for agent in options.agents.split(",") if agent]
    for unknown in set(hosts) - set(HOSTS) | set(agents) - set(AGENTS):
        raise SystemExit(
            f"error: unknown host or agent {unknown!r}: hosts {', '.join(HOSTS)}; agents {', '.join(AGENTS)}"
        )
    results: dict[tuple[str, str], str] = {}
    warned: dict[str, list[str]] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agent-unit-matrix-") as temporary:
        work = Path(temporary)
        redis, store = start_redis(work) if set(hosts) - {"cloudflare"} else (None, "")
        try:
            project = work / "project"
            shutil.copytree(
                HERE, project, ignore=shutil.ignore_patterns(".output", ".vercel", ".agent-unit", "__pycache__")
            )
            for module in (project / "agents").glob("*.py"):
                if module.stem not in agents:
                    module.unlink()  # the build carries (and vendors for) the chosen agents only
            (project / "agent-unit.toml").write_text(f'name = "universal"\nstorage = "{store}"\n')
            for preset in hosts:
                if preset in LABELS:
                    results.update(labelled(preset, project, agents))
                    continue
                if preset == "cloudflare" and (why := workerd_missing()):
                    results.update({(preset, name): NO_WORKERD for name in agents})
                    NOTES[preset] = why
                    continue
                say(f"agent-unit build --preset {preset}")
                effects = work / f"effects-{preset}.txt"
                env = {"PATH": os.environ["PATH"], "AGENT_UNIT_SECRET": SECRET, "EFFECTS_FILE": str(effects)}
                try:
                    host = host_for(preset, project, work, env)
                except RuntimeError as error:
                    results.update({(preset, name): f"build failed: {str(error)[:80]}" for name in agents})
                    print(error, file=sys.stderr)
                    continue
                if isinstance(host, Workerd) and host.warnings:
                    warned[preset] = host.warnings
                run_all(host, preset, agents, effects, results)
        finally:
            if redis is not None:
                redis.terminate()
                redis.wait(timeout=10)
    print()
    print(table(results, hosts, agents, warned))
    print(f"\n{time.monotonic() - started:.0f} s")
    passed = {"ok", NO_WORKERD, *LABELS.values()}
    failed = [cell for cell in results.values() if cell not in passed]
    return 1 if failed else 0


def run_all(host: Host, preset: str, agents: list[str], effects: Path, results: dict[tuple[str, str], str]) -> None:
    """Every agent's case on one host, started once: each case restarts it anyway (a host whose
    case broke is stopped, and the next case starts it afresh)."""
    running = False
    try:
        for name in agents:
            say(f"{preset} x {name}: start, pause, restart, resume")
            try:
                if not running:
                    host.start()
                    running = True
                results[(preset, name)] = run_case(host, name, AGENTS[name], effects)
                if results[(preset, name)] == "ok" and isinstance(host, Workerd) and (line := host.uncaught()):
                    results[(preset, name)] = f"logged: {line.strip()[:200]}"
                if results[(preset, name)] != "ok" and isinstance(host, Workerd):
                    print(host.log_tail(), file=sys.stderr)  # what the Worker said: the cell shows only a line
            except Exception as error:  # noqa: BLE001 - a cell that breaks is reported in the table, the rest still run
                results[(preset, name)] = f"error: {type(error).__name__}: {str(error)[:200]}"
                if isinstance(host, Workerd):
                    print(host.log_tail(), file=sys.stderr)
                host.stop()
                running = False
            print(f"    {results[(preset, name)]}", flush=True)
    finally:
        host.stop()


def workerd_missing() -> str | None:
    """Why real workerd cannot run here (npm or the Pyodide bundle is missing), or None."""
    sys.path.insert(0, str(ROOT))
    from tests.hosts.workerd.runtime import missing

    return missing()


def labelled(preset: str, project: Path, agents: list[str]) -> dict[tuple[str, str], str]:
    """A host that cannot run here: built where the preset exists, and labelled in the table."""
    if preset == "netlify":
        say("agent-unit build --preset netlify --origin https://agents.example.com")
        try:
            build(project, "netlify", "--origin", "https://agents.example.com")
        except RuntimeError as error:
            return {(preset, name): f"build failed: {str(error)[:80]}" for name in agents}
    return {(preset, name): LABELS[preset] for name in agents}


if __name__ == "__main__":
    raise SystemExit(main())
