"""``server = "google-adk"`` on vercel: an instance started as Vercel's functions runtime starts one,
then a second one that reads the session the first wrote to Postgres."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..support import fetch
from ..support.google_adk_server import USER, built, message, project, texts
from ..support.servers import PostgresServer
from . import test_preset_vercel
from .test_preset_vercel import FUNCTION, Instance

pytestmark = pytest.mark.slow  # builds a preset's output with pip and starts it in a subprocess

function_python = test_preset_vercel.function_python  # the fixture: a Python 3.12+ for Vercel's runtime


def test_a_vercel_instance_serves_adks_api_and_another_instance_reads_the_session_from_postgres(
    tmp_path: Path, postgres_server: PostgresServer, function_python: tuple[str, str]
) -> None:
    config = '[server]\npreset = "google-adk"\nsession_service_uri = "postgresql+psycopg://${ADK_DATABASE}"\n'
    root = project(tmp_path / "project", config)
    built(root, "--preset", "vercel", "--python", function_python[1])
    folder = root / ".vercel" / "output" / FUNCTION
    env = {"ADK_DATABASE": postgres_server.url.removeprefix("postgresql://")}

    first = Instance(folder, function_python[0], env).start()
    try:
        session = fetch.post(f"{first.url}/apps/helper/users/{USER}/sessions", json={}).json()["id"]
        run = {"app_name": "helper", "user_id": USER, "session_id": session, "new_message": message("add")}
        answered = fetch.post(f"{first.url}/run", json=run, timeout=60)
        assert answered.status_code == 200, first.logs()
        assert texts(answered.json()) == ["the sum is 5"]
    finally:
        first.stop()
    second = Instance(folder, function_python[0], env).start()  # a new instance: nothing kept in memory
    try:
        read = fetch.get(f"{second.url}/apps/helper/users/{USER}/sessions/{session}").json()
        assert texts(read["events"]) == ["add", "the sum is 5"], second.logs()
    finally:
        second.stop()
