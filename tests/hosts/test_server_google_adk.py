"""``server = "google-adk"``: Google ADK's own FastAPI app, built for each host as your own app is.

A project with ADK's layout (``agents/<agent>/agent.py`` with ``root_agent``) and an offline
model of its own (a ``BaseLlm`` that answers from the request, no network) is built, and ADK's
own API is driven through a session, as a client of ``adk api_server`` would:

- server: the output moved elsewhere and started with ``python -I -S main.py``; a session made,
  a run answered by the model and a tool, the session read back, then again after a restart
  (the session is in a SQLite file in the working directory's ``.agent-unit/``); a DNS-rebinding
  Host and a foreign page's POST refused by agent-unit's checks in front of ADK's app;
- docker: what the Dockerfile copies, its CMD run with the image's ENV (no Docker engine here),
  the sessions in the image's writable ``.agent-unit/`` folder;
- aws-lambda and vercel: in test_server_google_adk_lambda.py and _vercel.py (each its own
  module, so the three builds run side by side);
- what the build refuses: in-memory or local sessions on a serverless host, a Worker (naming
  the packages), the engine's settings beside the server preset, an unknown server preset.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..support import fetch
from ..support.docker_image import dockerfile, image_folder
from ..support.google_adk_server import USER, Started, built, message, project, refused, texts
from . import test_preset_vercel

pytestmark = pytest.mark.slow  # builds a preset's output with pip and starts it in a subprocess

function_python = test_preset_vercel.function_python  # the fixture: a Python 3.12+ for Vercel's runtime


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
    assert fetch.get(f"{url}/list-apps").json() == ["helper"]
    session = fetch.post(f"{url}/apps/helper/users/{USER}/sessions", json={"state": {"n": 1}}).json()
    events = fetch.post(
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
    again = fetch.get(f"{started.url}/apps/helper/users/{USER}/sessions/{session['id']}").json()
    assert texts(again["events"]) == ["add", "the sum is 5"]
    assert again["state"] == {"n": 1}


def test_a_server_build_refuses_a_rebinding_host_and_a_foreign_pages_post_before_adk_sees_them(
    started: Started,
) -> None:
    """ADK's app is not agent-unit's, yet agent-unit's Host and Origin checks stand in front of it:
    a DNS-rebinding page (its Host and Origin its own domain) reads nothing and makes no session,
    a page of another site makes no run, and ADK's own clients are served as before."""
    sessions = f"{started.url}/apps/helper/users/visitor/sessions"  # a user no other test has
    rebound = {"host": "evil.example", "origin": "http://evil.example"}
    for method in ("GET", "POST"):
        refused = fetch.request(method, sessions, json={}, headers=rebound)
        assert refused.status_code == 421, refused.text
        assert refused.json()["error"]["code"] == "forbidden_host"
    assert fetch.get(f"{started.url}/list-apps", headers={"host": "evil.example:80"}).status_code == 421
    foreign = fetch.post(sessions, json={"state": {"by": "evil"}}, headers={"origin": "https://evil.example"})
    assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "forbidden_origin"
    run = {"app_name": "helper", "user_id": "visitor", "session_id": "s1", "new_message": message("add")}
    assert fetch.post(f"{started.url}/run", json=run, headers={"origin": "https://evil.example"}).status_code == 403
    assert fetch.get(sessions).json() == []  # nothing was made
    own = fetch.post(sessions, json={}, headers={"origin": started.url})  # the dev UI's own page
    assert own.status_code == 200, own.text
    listed = fetch.get(sessions, headers={"host": "localhost"}).json()
    assert [session["id"] for session in listed] == [own.json()["id"]]


def test_web_true_serves_adks_dev_ui(started: Started) -> None:
    page = fetch.get(f"{started.url}/dev-ui/", follow_redirects=True)
    assert page.status_code == 200 and "<html" in page.text.lower()


def test_the_docker_images_cmd_run_locally_serves_adks_api_with_the_sessions_in_its_agent_unit_folder(
    tmp_path: Path,
) -> None:
    """Not a container (no Docker engine here): what the Dockerfile copies, in a folder elsewhere
    (its ``/app``), and its CMD run there with the image's ENV and ``python -I -S``."""
    root = project(tmp_path / "project", 'server = "google-adk"\n')
    output = Path(built(root, "--preset", "docker")["output"])
    image = dockerfile((output / "Dockerfile").read_text())
    workdir = image_folder(output, image, tmp_path / "image")
    (workdir / ".agent-unit").mkdir()  # the image's RUN makes it, for the agent user
    assert image["cmd"] == ["python", "main.py"]
    server = Started(workdir, tmp_path / "server.log", env=image["env"]).start()
    try:
        session = fetch.post(f"{server.url}/apps/helper/users/{USER}/sessions", json={}).json()["id"]
        run = {"app_name": "helper", "user_id": USER, "session_id": session, "new_message": message("add")}
        assert texts(fetch.post(f"{server.url}/run", json=run, timeout=60).json()) == ["the sum is 5"]
    finally:
        server.stop()
    assert (workdir / ".agent-unit" / "adk-sessions.db").is_file()  # where a volume keeps them


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
