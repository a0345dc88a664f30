"""``server = "google-adk"``: Google ADK's own FastAPI app, built for each host as your own app is.

A project with ADK's layout (``agents/<agent>/agent.py`` with ``root_agent``) and an offline
model of its own (a ``BaseLlm`` that answers from the request, no network) is built, and ADK's
own API is driven through a session, as a client of ``adk api_server`` would:

- server: the output moved elsewhere and started with ``python -I -S main.py``; a session made,
  a run answered by the model and a tool, the session read back, then again after a restart
  (the session is in a SQLite file in the working directory's ``.agent-unit/``);
- docker: what the Dockerfile copies, its CMD run with the image's ENV (no Docker engine here),
  the sessions in the image's writable ``.agent-unit/`` folder;
- aws-lambda: the unpacked zip, each invocation a new ``python -I -S`` process taking a real
  Function URL event, with the sessions in a real Postgres (a cold container reads the session
  another wrote);
- vercel: an instance started as Vercel's functions runtime starts one, then a second one that
  reads the session the first wrote to Postgres;
- what the build refuses: in-memory or local sessions on a serverless host, a Worker (naming
  the packages), the engine's settings beside the server preset, an unknown server preset.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..support.server import free_port
from ..support.servers import PostgresServer
from . import test_preset_vercel
from .test_preset_server_app import cold_container, dockerfile, http_event
from .test_preset_vercel import FUNCTION, Instance

pytestmark = pytest.mark.slow  # builds a preset's output with pip and starts it in a subprocess

function_python = test_preset_vercel.function_python  # the fixture: a Python 3.12+ for Vercel's runtime

AGENT = '''from google.adk.agents import Agent
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.genai import types


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Offline(BaseLlm):
    """Calls add(2, 3) once, then says what the tool answered: no network, no key."""

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False):
        last = llm_request.contents[-1]
        answered = [part.function_response.response for part in last.parts or [] if part.function_response]
        if answered:
            part = types.Part(text=f"the sum is {answered[0]['result']}")
        else:
            part = types.Part(function_call=types.FunctionCall(name="add", args={"a": 2, "b": 3}, id="call_1"))
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


root_agent = Agent(name="helper", model=Offline(model="offline"), instruction="Add numbers.", tools=[add])
'''

USER = "u1"


def project(folder: Path, config: str) -> Path:
    agent = folder / "agents" / "helper"
    agent.mkdir(parents=True)
    (agent / "__init__.py").write_text("from . import agent\n")
    (agent / "agent.py").write_text(AGENT)
    (folder / "agent-unit.toml").write_text(config)
    return folder


def build(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "build", "--root", str(root), "--json", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )


def built(root: Path, *args: str) -> dict[str, Any]:
    done = build(root, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def refused(root: Path, *args: str) -> str:
    done = build(root, *args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr + done.stdout


def message(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def texts(events: list[dict[str, Any]]) -> list[str]:
    return [part["text"] for event in events for part in event["content"]["parts"] if part.get("text")]


class Started:
    """``python -I -S main.py`` in a built folder, stopped by the test that starts it."""

    def __init__(self, folder: Path, log: Path, env: dict[str, str] | None = None) -> None:
        self.folder, self.log, self.image_env = folder, log, env or {}
        self.url = ""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Started:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {**self.image_env, "PATH": os.environ["PATH"], "HOST": "127.0.0.1", "PORT": str(port)}
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", "main.py"], cwd=self.folder, env=env, stdout=out, stderr=out
            )
        for _ in range(600):
            try:
                if httpx.get(f"{self.url}/list-apps", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            subprocess.run(["sleep", "0.1"], check=True)
        raise AssertionError(f"ADK's app did not answer: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def server_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("adk-server")
    root = project(tmp / "project", 'name = "adk"\n\n[server]\npreset = "google-adk"\nweb = true\n')
    result = built(root, "--preset", "server")
    moved = tmp / "elsewhere"
    shutil.move(result["output"], moved)
    return moved, result


@pytest.fixture
def started(server_build: tuple[Path, dict[str, Any]], tmp_path: Path) -> Iterator[Started]:
    server = Started(server_build[0], tmp_path / "server.log")
    try:
        yield server.start()
    finally:
        server.stop()


def test_the_server_build_reports_adks_app_and_vendors_google_adk(server_build: tuple[Path, dict[str, Any]]) -> None:
    folder, result = server_build
    assert result["server"] == "google-adk"
    assert result["routes"] == [] and result["agents"] == []
    assert "Google ADK's own app" in result["notes"][0]
    assert (folder / "app" / "agent_unit_google_adk.py").is_file()
    assert (folder / "app" / "agents" / "helper" / "agent.py").is_file()
    assert (folder / "vendor" / "google" / "adk").is_dir()


def test_a_moved_server_build_serves_adks_api_through_a_session_and_keeps_it_across_a_restart(
    started: Started,
) -> None:
    url = started.url
    assert httpx.get(f"{url}/list-apps").json() == ["helper"]
    session = httpx.post(f"{url}/apps/helper/users/{USER}/sessions", json={"state": {"n": 1}}).json()
    events = httpx.post(
        f"{url}/run",
        json={"app_name": "helper", "user_id": USER, "session_id": session["id"], "new_message": message("add")},
        timeout=60,
    ).json()
    calls = [part["functionCall"] for event in events for part in event["content"]["parts"] if "functionCall" in part]
    assert calls and calls[0]["name"] == "add"
    assert texts(events) == ["the sum is 5"]

    started.stop()  # the sessions are in a SQLite file in the working directory: a new process reads them
    assert (started.folder / ".agent-unit" / "adk-sessions.db").is_file()
    started.start()
    again = httpx.get(f"{started.url}/apps/helper/users/{USER}/sessions/{session['id']}").json()
    assert texts(again["events"]) == ["add", "the sum is 5"]
    assert again["state"] == {"n": 1}


def test_web_true_serves_adks_dev_ui(started: Started) -> None:
    page = httpx.get(f"{started.url}/dev-ui/", follow_redirects=True)
    assert page.status_code == 200 and "<html" in page.text.lower()


def test_the_docker_images_cmd_run_locally_serves_adks_api_with_the_sessions_in_its_agent_unit_folder(
    tmp_path: Path,
) -> None:
    """Not a container (no Docker engine here): what the Dockerfile copies, in a folder elsewhere
    (its ``/app``), and its CMD run there with the image's ENV and ``python -I -S``."""
    root = project(tmp_path / "project", 'server = "google-adk"\n')
    output = Path(built(root, "--preset", "docker")["output"])
    image = dockerfile((output / "Dockerfile").read_text())
    workdir = tmp_path / "image" / image["workdir"].strip("/")
    for source, target in image["copy"]:
        copied = tmp_path / "image" / target.strip("/")
        if (output / source).is_dir():
            shutil.copytree(output / source, copied)
        else:
            copied.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(output / source, copied)
    (workdir / ".agent-unit").mkdir()  # the image's RUN makes it, for the agent user
    assert image["cmd"] == ["python", "main.py"]
    server = Started(workdir, tmp_path / "server.log", env=image["env"]).start()
    try:
        session = httpx.post(f"{server.url}/apps/helper/users/{USER}/sessions", json={}).json()["id"]
        run = {"app_name": "helper", "user_id": USER, "session_id": session, "new_message": message("add")}
        assert texts(httpx.post(f"{server.url}/run", json=run, timeout=60).json()) == ["the sum is 5"]
    finally:
        server.stop()
    assert (workdir / ".agent-unit" / "adk-sessions.db").is_file()  # where a volume keeps them


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()
        server.remove()


def test_an_unpacked_lambda_zip_serves_adks_api_with_sessions_in_postgres(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    config = '[server]\npreset = "google-adk"\nsession_service_uri = "postgresql+psycopg://${ADK_DATABASE}"\n'
    root = project(tmp_path / "project", config)  # the secret is not set at build: the app reads it where it runs
    result = built(root, "--preset", "aws-lambda")
    folder = tmp_path / "function"
    with zipfile.ZipFile(Path(result["output"]) / "function.zip") as archive:
        archive.extractall(folder)
    env = {"ADK_DATABASE": postgres.url.removeprefix("postgresql://")}
    log = tmp_path / "log"

    made = cold_container(folder, log, http_event(f"/apps/helper/users/{USER}/sessions", "POST", {}), env=env)[0]
    assert made["statusCode"] == 200, made
    session = json.loads(made["body"])["id"]
    run = {"app_name": "helper", "user_id": USER, "session_id": session, "new_message": message("add")}
    answered = cold_container(folder, log, http_event("/run", "POST", run), env=env)[0]
    assert answered["statusCode"] == 200, answered
    assert texts(json.loads(answered["body"])) == ["the sum is 5"]

    read = cold_container(folder, log, http_event(f"/apps/helper/users/{USER}/sessions/{session}"), env=env)[0]
    assert texts(json.loads(read["body"])["events"]) == ["add", "the sum is 5"]


def test_a_vercel_instance_serves_adks_api_and_another_instance_reads_the_session_from_postgres(
    tmp_path: Path, postgres: PostgresServer, function_python: tuple[str, str]
) -> None:
    config = '[server]\npreset = "google-adk"\nsession_service_uri = "postgresql+psycopg://${ADK_DATABASE}"\n'
    root = project(tmp_path / "project", config)
    built(root, "--preset", "vercel", "--python", function_python[1])
    folder = root / ".vercel" / "output" / FUNCTION
    env = {"ADK_DATABASE": postgres.url.removeprefix("postgresql://")}

    first = Instance(folder, function_python[0], env).start()
    try:
        session = httpx.post(f"{first.url}/apps/helper/users/{USER}/sessions", json={}).json()["id"]
        run = {"app_name": "helper", "user_id": USER, "session_id": session, "new_message": message("add")}
        answered = httpx.post(f"{first.url}/run", json=run, timeout=60)
        assert answered.status_code == 200, first.logs()
        assert texts(answered.json()) == ["the sum is 5"]
    finally:
        first.stop()
    second = Instance(folder, function_python[0], env).start()  # a new instance: nothing kept in memory
    try:
        read = httpx.get(f"{second.url}/apps/helper/users/{USER}/sessions/{session}").json()
        assert texts(read["events"]) == ["add", "the sum is 5"], second.logs()
    finally:
        second.stop()


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ("", "session_service_uri is not set"),
        ('session_service_uri = "memory://"', "session_service_uri is 'memory://'"),
        ('session_service_uri = "sqlite:///sessions.db"', "keeps no file or memory"),
        (
            'session_service_uri = "postgresql+psycopg://db/adk"\nartifact_service_uri = "file:///tmp/a"',
            "server.artifact_service_uri = 'file:///tmp/a'",
        ),
    ],
)
@pytest.mark.parametrize("preset", ["aws-lambda", "vercel"])
def test_a_serverless_build_refuses_sessions_or_artifacts_the_host_does_not_keep(
    tmp_path: Path, table: str, expected: str, preset: str
) -> None:
    root = project(tmp_path, f'[server]\npreset = "google-adk"\n{table}\n')
    text = refused(root, "--preset", preset)
    assert expected in text
    assert not (root / ".output").exists() and not (root / ".vercel").exists()


def test_cloudflare_refuses_adk_naming_the_packages_a_worker_cannot_run(tmp_path: Path) -> None:
    text = refused(project(tmp_path, 'server = "google-adk"\n'), "--preset", "cloudflare")
    assert "Pyodide" in text and "aiosqlite" in text and "cryptography" in text
    assert "--preset server, docker, aws-lambda or vercel" in text


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ('server = "google-adk"\nstorage = "redis://localhost"\n', "serves the framework's own app"),
        ('server = "no-such-server"\n', "no server preset of that name: use one of google-adk"),
        ('[server]\npreset = "google-adk"\nsession = "x"\n', "server.session: unknown key for google-adk"),
    ],
)
def test_a_server_preset_config_mistake_is_one_error_that_says_what_to_do(
    tmp_path: Path, config: str, expected: str
) -> None:
    assert expected in refused(project(tmp_path, config))


def test_agent_unit_dev_serves_the_server_preset_as_the_server_build_does(tmp_path: Path) -> None:
    root = project(tmp_path / "project", 'server = "google-adk"\n')
    done = subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "dev", "--check", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dev: the google-adk server from" in done.stdout and "the app starts" in done.stdout
