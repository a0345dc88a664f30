"""``server = "module:app"``: agent-unit builds the user's own ASGI app for each host, as the host runs it.

A FastAPI app with a route, a lifespan, ``wait_until`` work and a task, built for:

- server: the folder moved elsewhere and served by ``python -I -S main.py`` (uvicorn);
- docker: the Dockerfile checked, and its CMD run locally (no Docker engine here, so not a
  container) from what it copies, moved elsewhere, with the image's ENV and HOST/PORT;
- aws-lambda: the unpacked zip, each cold container a new ``python -I -S`` process taking
  events in turn (``tests/support/lambda_containers``; two in one process: the lifespan starts
  once per container, not per invocation);
- vercel: an instance started as Vercel's functions runtime starts one.

An app that mounts agents at ``/api/ai``, on aws-lambda and vercel: a run sleeps and the host's
scheduled event wakes it; a run that yields at its budget continues under the mount path.

The route answers, the lifespan started once per process, the ``wait_until`` work is done (on
Lambda before the handler returns), the task runs; a DNS-rebinding Host (server) and a foreign
page's POST (server, aws-lambda, dev) are refused by agent-unit's checks in front of the app.
And a table of bad input, each refused with one clear error and nothing written.

Builds run pip, so each is built once per module and shared by the tests that read it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..support import fetch
from ..support.dev_process import DevProcess
from ..support.docker_image import dockerfile, image_folder
from ..support.lambda_containers import Container
from ..support.server import free_port, wait_until_up
from . import test_preset_vercel
from .test_preset_aws_lambda import FunctionUrl, Lambda, lint
from .test_preset_vercel import CRON_SECRET, FUNCTION, Deployment, Instance

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in a subprocess: left out of `make check`

function_python = test_preset_vercel.function_python  # the fixture: a Python 3.12+ for Vercel's runtime

APP = """import os
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI

from agent_unit.env import wait_until


def note(line: str) -> None:
    with Path(os.environ["APP_LOG"]).open("a") as out:
        out.write(line + "\\n")


@asynccontextmanager
async def lifespan(app):
    note("lifespan started")
    yield


app = FastAPI(lifespan=lifespan)


async def later(who: str) -> None:
    note(f"later {who}")


@app.get("/hello/{who}")
async def hello(who: str):
    wait_until(later(who))
    return {"hello": who}


@app.get("/serving")
async def serving():
    import asyncio, sys
    http = "httptools" if "uvicorn.protocols.http.httptools_impl" in sys.modules else "h11"
    if "agent_unit.hosts.uvicorn_http" in sys.modules:
        http += ", head with body"
    return {"loop": type(asyncio.get_running_loop()).__module__.split(".")[0], "http": http}


@app.post("/pay/{who}")
async def pay(who: str):
    note(f"paid {who}")
    return {"paid": who}


async def digest(name, scheduled_at):
    note(f"task {name}")
"""

CONFIG = """server = "web.main:app"

[tasks.every-minute]
schedule = "* * * * *"
handler = "web.main:digest"
"""


def project(folder: Path, config: str = CONFIG) -> Path:
    (folder / "web").mkdir(parents=True)
    (folder / "web" / "__init__.py").write_text("")
    (folder / "web" / "main.py").write_text(APP)
    (folder / "agent-unit.toml").write_text(config)
    return folder


def build(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "build", "--root", str(root), "--json", *args],
        capture_output=True,
        text=True,
    )


def built(root: Path, *args: str) -> dict[str, Any]:
    done = build(root, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def logged(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def http_event(path: str, method: str = "GET", body: Any = None) -> dict[str, Any]:
    """A Function URL event (payload 2.0) for ``method path``."""
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"host": "abc123.lambda-url.eu-west-1.on.aws", "content-type": "application/json"},
        "requestContext": {
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "198.51.100.7"},
            "domainName": "abc123.lambda-url.eu-west-1.on.aws",
            "requestId": f"req-{time.monotonic_ns()}",
            "routeKey": "$default",
            "stage": "$default",
        },
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
    }


def cold_container(
    folder: Path, log: Path, *events: dict[str, Any], env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """One new Lambda container (``python -I -S``) that takes ``events`` in turn, then is ended
    (killed, as Lambda ends one: work not done by an answer's return is lost)."""
    with Container(folder, {"PATH": os.environ["PATH"], "APP_LOG": str(log), **(env or {})}) as container:
        return [container.invoke(event) for event in events]


MOUNTED = """import asyncio
import os

from fastapi import FastAPI

from agent_unit import Run, create_agent_unit, define_agent


@define_agent
async def napper(input: str, run: Run) -> str:
    await run.sleep("1s")
    return f"rested {input}"


@define_agent
async def long(input: int, run: Run) -> int:
    total = 0
    for i in range(input):

        async def work(i: int = i) -> int:
            await asyncio.sleep(0.3)
            return i

        total += await run.step("work", work)
    return total


app = FastAPI()
store = os.environ.get("RUNS_URL", "memory://")
app.mount("/api/ai", create_agent_unit({"napper": napper, "long": long}, store=store, budget="1s"))
"""


@pytest.fixture(scope="module")
def server_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = project(tmp_path_factory.mktemp("app-server"))
    return root, built(root)


@pytest.fixture(scope="module")
def lambda_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = project(tmp_path_factory.mktemp("app-lambda"))
    result = built(root, "--preset", "aws-lambda")
    with zipfile.ZipFile(root / ".output" / "aws-lambda" / "function.zip") as archive:
        archive.extractall(root / "function")
    return root, result


def test_a_server_build_of_your_own_app_lists_no_agent_routes_and_says_so(
    server_build: tuple[Path, dict[str, Any]],
) -> None:
    root, result = server_build
    assert result["server"] == "web.main:app" and result["agents"] == [] and result["routes"] == []
    assert any("adds no engine, routes or storage" in note for note in result["notes"])
    assert (root / ".output" / "server" / "vendor" / "fastapi").is_dir()


@contextlib.contextmanager
def moved_server(root: Path, tmp_path: Path, log: Path) -> Iterator[str]:
    """The server build moved elsewhere and started with ``python -I -S``, up; yields its URL."""
    moved = tmp_path / "elsewhere" / "server"
    shutil.copytree(root / ".output" / "server", moved)
    port = free_port()
    environment = {"PATH": os.environ["PATH"], "PORT": str(port), "HOST": "127.0.0.1", "APP_LOG": str(log)}
    server = subprocess.Popen([sys.executable, "-I", "-S", "main.py"], cwd=moved, env=environment)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, timeout=120)  # any answer: the app is up
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_a_moved_server_build_serves_the_app_with_its_lifespan_wait_until_and_task(
    server_build: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    log = tmp_path / "app.log"
    with moved_server(server_build[0], tmp_path, log) as url:
        assert fetch.get(f"{url}/hello/ann").json() == {"hello": "ann"}
        assert fetch.get(f"{url}/serving").json() == {"loop": "uvloop", "http": "httptools, head with body"}
        deadline = time.monotonic() + 60
        while not {"later ann", "task every-minute"} <= set(logged(log)):
            assert time.monotonic() < deadline, logged(log)
            time.sleep(0.1)
    assert logged(log).count("lifespan started") == 1


def test_a_server_build_refuses_a_rebinding_host_and_a_foreign_pages_post_before_your_app_sees_them(
    server_build: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    log = tmp_path / "app.log"
    with moved_server(server_build[0], tmp_path, log) as url:
        rebound = fetch.post(f"{url}/pay/eve", headers={"host": "evil.example", "origin": "http://evil.example"})
        assert rebound.status_code == 421 and rebound.json()["error"]["code"] == "forbidden_host", rebound.text
        assert fetch.get(f"{url}/hello/eve", headers={"host": "evil.example"}).status_code == 421  # reads too
        foreign = fetch.post(f"{url}/pay/eve", headers={"origin": "https://evil.example"})
        assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "forbidden_origin", foreign.text
        assert "paid eve" not in logged(log)
        assert fetch.post(f"{url}/pay/ann").json() == {"paid": "ann"}  # a client that is no browser
        assert fetch.post(f"{url}/pay/bob", headers={"origin": url}).json() == {"paid": "bob"}  # the app's own page
        assert fetch.get(f"{url}/hello/ann", headers={"origin": "https://evil.example"}).json() == {"hello": "ann"}
    assert [line for line in logged(log) if line.startswith("paid")] == ["paid ann", "paid bob"]


@pytest.fixture(scope="module")
def docker_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = project(tmp_path_factory.mktemp("app-docker"))
    return root, built(root, "--preset", "docker")


def test_a_docker_build_of_your_own_app_has_a_dockerfile_that_runs_it_as_the_server_does(
    docker_build: tuple[Path, dict[str, Any]],
) -> None:
    root, result = docker_build
    output = root / ".output" / "docker"
    assert result["server"] == "web.main:app" and result["routes"] == []
    assert all("in-process scheduler" in task["runs_on"] for task in result["tasks"])
    text = (output / "Dockerfile").read_text()
    image = dockerfile(text)
    assert text.startswith("# ") and f"python:{sys.version_info.major}.{sys.version_info.minor}-slim" in text
    assert "\nUSER agent\n" in text and image["workdir"] == "/app" and image["cmd"] == ["python", "main.py"]
    assert "HEALTHCHECK" not in text  # agent-unit adds no /healthz to your app: nothing to probe
    assert image["copy"] == [("vendor/", "/app/vendor/"), ("main.py", "/app/main.py"), ("app/", "/app/app/")]
    assert all((output / source).exists() for source, _ in image["copy"])
    assert (output / "vendor" / "fastapi").is_dir() and (output / ".dockerignore").is_file()


def test_the_docker_images_cmd_run_locally_serves_the_app_with_its_lifespan_wait_until_and_task(
    docker_build: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """Not a container (no Docker engine here): the image's CMD, run as the container would run it.

    What the Dockerfile copies goes into a folder elsewhere (its ``/app``), and its CMD runs
    there with the image's ENV and nothing else of this machine's: ``python -I -S`` (no site
    packages, no user paths), ``HOST``/``PORT`` set as a platform sets them.
    """
    root, _ = docker_build
    output = root / ".output" / "docker"
    image = dockerfile((output / "Dockerfile").read_text())
    workdir = image_folder(output, image, tmp_path / "image")
    (workdir / ".agent-unit").mkdir()  # the image's RUN makes it, for the agent user
    # bytecode for every module, made at the image's build: its user cannot write beside the code,
    # so a container would otherwise compile each module it imports at every start
    tag = sys.implementation.cache_tag
    for module in ("main.py", "vendor/agent_unit/_engine.py", "vendor/fastapi/applications.py", "app/web/main.py"):
        source = workdir / module
        assert (source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc").is_file(), module
    log = tmp_path / "app.log"
    port = free_port()
    environment = {**image["env"], "PATH": os.environ["PATH"], "HOST": "127.0.0.1", "PORT": str(port)}
    environment["APP_LOG"] = str(log)
    python, *args = image["cmd"]
    assert python == "python"
    server = subprocess.Popen([sys.executable, "-I", "-S", *args], cwd=workdir, env=environment)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, timeout=120)
        assert fetch.get(f"{url}/hello/ann").json() == {"hello": "ann"}
        assert fetch.get(f"{url}/serving").json() == {"loop": "uvloop", "http": "httptools, head with body"}
        deadline = time.monotonic() + 60
        while not {"later ann", "task every-minute"} <= set(logged(log)):
            assert time.monotonic() < deadline, logged(log)
            time.sleep(0.1)
    finally:
        server.terminate()  # docker stop: SIGTERM
        server.wait(timeout=20)
    assert logged(log).count("lifespan started") == 1
    assert logged(log).count("task every-minute") == 1  # one tick, claimed in the image's own store
    assert (workdir / ".agent-unit" / "agent-unit.db").exists()  # where the image keeps it (a volume there keeps it)


def test_a_lambda_container_starts_the_lifespan_once_and_finishes_wait_until_before_it_answers(
    lambda_build: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    root, _ = lambda_build
    log = tmp_path / "app.log"
    first, second = cold_container(root / "function", log, http_event("/hello/ann"), http_event("/hello/bob"))
    assert json.loads(first["body"]) == {"hello": "ann"} and json.loads(second["body"]) == {"hello": "bob"}
    # the container ended right after its last answer: the work was done before each response returned
    assert logged(log) == ["lifespan started", "later ann", "later bob"]


def test_a_lambda_container_refuses_a_foreign_pages_post_before_your_app_sees_it(
    lambda_build: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """Lambda routes by Host (any Host is the function's own), but a page of another site that
    posts through a visitor's browser is refused by the Origin check in front of your app."""
    root, _ = lambda_build
    log = tmp_path / "app.log"
    foreign, own, plain = http_event("/pay/eve", "POST"), http_event("/pay/ann", "POST"), http_event("/pay/bob", "POST")
    foreign["headers"]["origin"] = "https://evil.example"
    own["headers"]["origin"] = f"https://{own['headers']['host']}"  # a page the function serves itself
    refused, *served = cold_container(root / "function", log, foreign, own, plain)
    assert refused["statusCode"] == 403 and json.loads(refused["body"])["error"]["code"] == "forbidden_origin"
    assert [json.loads(answer["body"]) for answer in served] == [{"paid": "ann"}, {"paid": "bob"}]
    assert [line for line in logged(log) if line.startswith("paid")] == ["paid ann", "paid bob"]


def test_a_lambda_schedule_event_runs_the_apps_task(lambda_build: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    root, _ = lambda_build
    log = tmp_path / "app.log"
    event = {"agent_unit": "task", "task": "every-minute", "scheduled_at": "2026-12-01T08:05:00Z"}
    assert cold_container(root / "function", log, event)[0]["ran"] is True
    assert "task every-minute" in logged(log)


def test_the_lambda_template_of_your_own_app_has_the_tasks_schedule_and_no_sweep(
    lambda_build: tuple[Path, dict[str, Any]],
) -> None:
    root, result = lambda_build
    template = (root / ".output" / "aws-lambda" / "template.yaml").read_text()
    assert lint(template) == []
    assert not any("authorize" in note for note in result["notes"])  # no agent routes of ours to guard
    assert template.count("Type: ScheduleV2") == 1  # the task's; the app mounts no agent unit to sweep
    assert "AGENT_UNIT_STORAGE" not in template


def test_a_vercel_instance_serves_the_app_with_its_lifespan_once_and_wait_until_in_the_invocation(
    tmp_path: Path, function_python: tuple[str, str]
) -> None:
    root = project(tmp_path / "project")
    built(root, "--preset", "vercel", "--python", function_python[1])
    config = json.loads((root / ".vercel" / "output" / "config.json").read_text())
    assert config["crons"] == [{"path": "/__agent-unit/tasks/every-minute", "schedule": "* * * * *"}]
    log = tmp_path / "app.log"
    env = {"APP_LOG": str(log), "CRON_SECRET": CRON_SECRET}
    instance = Instance(root / ".vercel" / "output" / FUNCTION, function_python[0], env).start()
    try:
        for who in ("ann", "bob"):
            answer = fetch.get(f"{instance.url}/hello/{who}", headers={"x-vercel-internal-request-id": who})
            assert answer.json() == {"hello": who}, instance.logs()
        task = f"{instance.url}/__agent-unit/tasks/every-minute"
        assert fetch.get(task, headers={"authorization": f"Bearer {CRON_SECRET}"}).json()["ran"] is True
    finally:
        instance.stop()
    assert logged(log) == ["lifespan started", "later ann", "later bob", "task every-minute"]


BAD = [
    (
        'storage = "redis://cache:6379"\nbase_path = "/api"\n' + CONFIG,
        "server = 'web.main:app' serves your own app, so agent-unit adds no engine and these keys do not apply: "
        "storage: ",
    ),
    ('server = "missing.main:app"\n', "server = 'missing.main:app': no module named 'missing' in the project"),
    (
        'server = "web.broken:app"\n',
        "server = 'web.broken:app': web.broken failed to import: ZeroDivisionError: division by zero "
        "(web/broken.py, line 2: ratio = 1 / 0)",
    ),
    ('server = "web.main:nothing"\n', "module web.main has no attribute 'nothing'"),
    ('server = "web.main:note"\n', "server = 'web.main:note' is a function, not an ASGI app"),
    ('server = "web.main:FastAPI"\n', "server = 'web.main:FastAPI' is a type, not an ASGI app"),
]


@pytest.mark.parametrize(("config", "message"), BAD)
def test_a_server_that_cannot_be_served_is_one_build_error_and_nothing_is_written(
    tmp_path: Path, config: str, message: str
) -> None:
    root = project(tmp_path, config)
    (root / "web" / "broken.py").write_text("import os\nratio = 1 / 0\n")
    done = build(root)
    assert done.returncode == 1, done.stdout
    error = json.loads(done.stdout)["error"]
    assert message in error, error
    assert "Traceback" not in done.stdout + done.stderr
    assert not (root / ".output").exists()


def test_every_engine_key_beside_server_is_named_in_one_error(tmp_path: Path) -> None:
    engine = (
        'storage = "redis://cache:6379"\nbudget = "10s"\nsweep = false\nretention = "7d"\nbase_path = "/api"\n'
        'authorize = "web.main:note"\nmax_body_bytes = 10\nadapters = ["x"]\nmcp = true\n'
    )
    root = project(tmp_path, engine + CONFIG)
    error = json.loads(build(root).stdout)["error"]
    for key in ("storage", "budget", "sweep", "retention", "base_path", "authorize", "max_body_bytes", "adapters"):
        assert f"; {key}: " in error or f" apply: {key}: " in error, (key, error)
    assert "mcp: " in error
    assert not (root / ".output").exists()


def test_dev_serves_your_own_app_behind_the_host_and_origin_checks_and_reloads_it_on_change(tmp_path: Path) -> None:
    root = project(tmp_path / "project")
    log = tmp_path / "app.log"
    dev = DevProcess(root, env={"APP_LOG": str(log)})
    try:
        dev.wait_for("serving on")
        assert "dev: your app web.main:app" in dev.output
        assert fetch.get(f"{dev.url}/hello/ann").json() == {"hello": "ann"}
        (root / "web" / "main.py").write_text(APP.replace('{"hello": who}', '{"hi": who}'))
        dev.wait_for("serving on", count=2)
        assert fetch.get(f"{dev.url}/hello/ann").json() == {"hi": "ann"}
        # dev serves it behind the Host and Origin checks a build puts in front of it
        rebound = fetch.post(f"{dev.url}/pay/eve", headers={"host": "evil.example", "origin": "http://evil.example"})
        assert rebound.status_code == 421, rebound.text
        foreign = {"origin": "https://evil.example"}
        assert fetch.post(f"{dev.url}/pay/eve", headers=foreign).json()["error"]["code"] == "forbidden_origin"
        assert "paid eve" not in logged(log)
        # host_guard = false: the app does its own checks, and gets every request
        (root / "agent-unit.toml").write_text("host_guard = false\n" + CONFIG)
        dev.wait_for("serving on", count=3)
        assert fetch.post(f"{dev.url}/pay/eve", headers=foreign).json() == {"paid": "eve"}
    finally:
        assert dev.stop() == 0
    assert "later ann" in logged(log)  # wait_until work runs in dev


def test_dev_refuses_a_server_that_is_not_asgi_with_one_message(tmp_path: Path) -> None:
    root = project(tmp_path / "project", 'server = "web.main:note"\n')
    done = subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "dev", "--root", str(root), "--port", str(free_port())],
        capture_output=True,
        text=True,
        env={**os.environ, "APP_LOG": str(tmp_path / "app.log")},
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "server = 'web.main:note' is a function, not an ASGI app" in done.stderr


MOUNTED_CONFIG = """server = "web.mounted:app"

[tasks.new-year]
schedule = "0 0 1 1 *"
handler = "web.main:digest"
"""


@pytest.fixture(scope="module")
def mounted_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A FastAPI app that mounts agents at /api/ai, built for aws-lambda and unpacked into function/."""
    root = project(tmp_path_factory.mktemp("app-mounted"), MOUNTED_CONFIG)
    (root / "web" / "mounted.py").write_text(MOUNTED)
    (root / "requirements.txt").write_text("fastapi\nredis\n")  # the app's store is its own: its driver is listed
    built(root, "--preset", "aws-lambda")
    with zipfile.ZipFile(root / ".output" / "aws-lambda" / "function.zip") as archive:
        archive.extractall(root / "function")
    return root


def test_agents_mounted_in_your_app_on_lambda_sleep_and_the_scheduled_sweep_wakes_them(
    mounted_build: Path, tmp_path: Path, redis_url: str
) -> None:
    template = (mounted_build / ".output" / "aws-lambda" / "template.yaml").read_text()
    assert 'Input: \'{"agent_unit": "sweep"}\'' in template  # the app created an agent unit: it is swept
    folder, log, env = mounted_build / "function", tmp_path / "app.log", {"RUNS_URL": redis_url}
    (started,) = cold_container(
        folder, log, http_event("/api/ai/agents/napper/runs", "POST", {"input": "well"}), env=env
    )
    run = json.loads(started["body"])
    assert run["status"] == "sleeping", run  # buffered, as Lambda needs: the answer came once the run parked
    time.sleep(1.2)
    # the schedule's events reach another container: the one that started the run is gone
    refused, swept, read = cold_container(
        folder,
        log,
        http_event("/api/ai/__agent-unit/sweep", "POST"),
        {"agent_unit": "sweep"},
        http_event(f"/api/ai/runs/{run['id']}"),
        env=env,
    )
    assert refused["statusCode"] == 401  # deployed: the unit's internal routes need AGENT_UNIT_SECRET
    assert swept == {"woken": 1, "recovered": 0, "deleted": 0}
    done = json.loads(read["body"])
    assert done["status"] == "completed" and done["output"] == "rested well"


def test_a_repeated_schedule_event_runs_a_task_once_in_the_store_of_the_agents_your_app_mounted_on_lambda(
    mounted_build: Path, tmp_path: Path, redis_url: str
) -> None:
    folder, log, env = mounted_build / "function", tmp_path / "app.log", {"RUNS_URL": redis_url}
    event = {"agent_unit": "task", "task": "new-year", "scheduled_at": "2027-01-01T00:00:00Z"}
    # EventBridge delivers at least once: again in the same container, and in another one
    first, again = cold_container(folder, log, event, event, env=env)
    (later,) = cold_container(folder, log, event, env=env)
    assert [first["ran"], again["ran"], later["ran"]] == [True, False, False]
    assert logged(log).count("task new-year") == 1


def test_a_run_of_agents_mounted_in_your_app_on_lambda_continues_under_the_mount_path(
    mounted_build: Path, tmp_path: Path, redis_url: str
) -> None:
    function = Lambda(mounted_build / "function", {"RUNS_URL": redis_url, "APP_LOG": str(tmp_path / "app.log")})
    function.url = FunctionUrl(function)  # each POST to the function's own URL is a new invocation
    function.env["AGENT_UNIT_URL"] = function.url.url
    try:
        first = function.http("POST", "/api/ai/agents/long/runs", {"input": 10})["json"]
        assert first["status"] in ("queued", "running")  # it yielded at its 1 s budget and handed itself on
        deadline = time.monotonic() + 90
        while (record := function.http("GET", f"/api/ai/runs/{first['id']}")["json"])["status"] != "completed":
            assert time.monotonic() < deadline, record  # no sweep runs here: only continuations move it
            time.sleep(0.5)
        assert record["output"] == sum(range(10))
    finally:
        function.close()
        function.url.close()


@pytest.fixture(scope="module")
def mounted_vercel(tmp_path_factory: pytest.TempPathFactory, function_python: tuple[str, str]) -> Path:
    """The same app, mounting agents at /api/ai, built for vercel: the function's folder."""
    root = project(tmp_path_factory.mktemp("app-mounted-vercel"), MOUNTED_CONFIG)
    (root / "web" / "mounted.py").write_text(MOUNTED)
    (root / "requirements.txt").write_text("fastapi\nredis\n")
    built(root, "--preset", "vercel", "--python", function_python[1])
    return root / ".vercel" / "output"


def _settled(url: str, run_id: str, *statuses: str) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    while (record := fetch.get(f"{url}/api/ai/runs/{run_id}").json())["status"] not in statuses:
        assert time.monotonic() < deadline, record
        time.sleep(0.2)
    return record  # type: ignore[no-any-return]


def test_agents_mounted_in_your_app_on_vercel_sleep_and_the_cron_wakes_them(
    mounted_vercel: Path, function_python: tuple[str, str], redis_url: str, tmp_path: Path
) -> None:
    config = json.loads((mounted_vercel / "config.json").read_text())
    assert config["crons"][0] == {"path": "/__agent-unit/sweep", "schedule": "* * * * *"}  # the app made a unit
    env = {"RUNS_URL": redis_url, "APP_LOG": str(tmp_path / "app.log"), "CRON_SECRET": CRON_SECRET}
    first = Instance(mounted_vercel / FUNCTION, function_python[0], env).start()
    try:
        run = fetch.post(f"{first.url}/api/ai/agents/napper/runs", json={"input": "well"}, timeout=30).json()
        _settled(first.url, run["id"], "sleeping")
    finally:
        first.stop()  # the instance that armed a timer for it is gone (frozen, recycled)
    time.sleep(1.2)
    second = Instance(mounted_vercel / FUNCTION, function_python[0], env).start()
    try:
        sweep = f"{second.url}/__agent-unit/sweep"
        assert fetch.get(sweep).status_code == 401
        assert fetch.post(f"{second.url}/api/ai/__agent-unit/sweep").status_code == 401  # the unit's own, too
        woken = fetch.get(sweep, headers={"authorization": f"Bearer {CRON_SECRET}", "user-agent": "vercel-cron/1.0"})
        assert woken.json() == {"woken": 1, "recovered": 0, "deleted": 0}, second.logs()
        done = fetch.get(f"{second.url}/api/ai/runs/{run['id']}").json()
        assert done["status"] == "completed" and done["output"] == "rested well"
    finally:
        second.stop()


def test_a_run_of_agents_mounted_in_your_app_on_vercel_continues_under_the_mount_path(
    mounted_vercel: Path, function_python: tuple[str, str], redis_url: str, tmp_path: Path
) -> None:
    site = Deployment()
    # CRON_SECRET alone: the preset says it is enough for continuations
    env = {"RUNS_URL": redis_url, "APP_LOG": str(tmp_path / "app.log"), "CRON_SECRET": CRON_SECRET}
    env["AGENT_UNIT_URL"] = site.url
    try:
        for _ in range(2):
            site.instances.append(Instance(mounted_vercel / FUNCTION, function_python[0], env).start())
        first = site.instances[0]
        started = fetch.post(f"{first.url}/api/ai/agents/long/runs", json={"input": 10}, timeout=30)
        assert started.status_code == 202, started.text
        run_id = started.json()["id"]
        done = _settled(first.url, run_id, "completed", "failed")  # no sweep runs here: only continuations
        assert done["output"] == sum(range(10)), first.logs() + site.instances[1].logs()
        # 3 s of work in 1 s slices, continued at the deployment's URL under the mount path
        assert site.continued.count(run_id) >= 2
    finally:
        for instance in site.instances:
            instance.stop()
        site.close()


def test_a_repeated_cron_request_runs_a_task_once_in_the_store_of_the_agents_your_app_mounted_on_vercel(
    mounted_vercel: Path, function_python: tuple[str, str], redis_url: str, tmp_path: Path
) -> None:
    config = json.loads((mounted_vercel / "config.json").read_text())
    assert {"path": "/__agent-unit/tasks/new-year", "schedule": "0 0 1 1 *"} in config["crons"]
    log = tmp_path / "app.log"
    env = {"RUNS_URL": redis_url, "APP_LOG": str(log), "CRON_SECRET": CRON_SECRET}
    answers = []
    for _ in range(2):  # Vercel may deliver a cron twice, to any instance: here to two in turn
        instance = Instance(mounted_vercel / FUNCTION, function_python[0], env).start()
        try:
            route = f"{instance.url}/__agent-unit/tasks/new-year"
            answers.append(fetch.get(route, headers={"authorization": f"Bearer {CRON_SECRET}"}, timeout=30).json())
        finally:
            instance.stop()
    assert answers[0]["scheduled_at"] == answers[1]["scheduled_at"]  # the year's one tick, whenever it is asked
    assert [answer["ran"] for answer in answers] == [True, False]
    assert logged(log).count("task new-year") == 1
