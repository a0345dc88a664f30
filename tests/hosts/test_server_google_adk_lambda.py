"""``server = "google-adk"`` on aws-lambda: the unpacked zip, each container a new ``python -I -S``
process taking real Function URL events, with the sessions in a real Postgres: one container makes
a session and runs the agent in it, and a cold one reads the session (and its events) the other
wrote. (Two containers, not one per invocation: each imports ADK, seconds of CPU.)"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from ..support.google_adk_server import USER, built, message, project, texts
from ..support.lambda_containers import Container
from ..support.servers import PostgresServer
from .test_preset_server_app import cold_container, http_event

pytestmark = pytest.mark.slow  # builds a preset's output with pip and starts it in a subprocess


def test_an_unpacked_lambda_zip_serves_adks_api_with_sessions_in_postgres(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    config = '[server]\npreset = "google-adk"\nsession_service_uri = "postgresql+psycopg://${ADK_DATABASE}"\n'
    root = project(tmp_path / "project", config)  # the secret is not set at build: the app reads it where it runs
    result = built(root, "--preset", "aws-lambda")
    folder = tmp_path / "function"
    with zipfile.ZipFile(Path(result["output"]) / "function.zip") as archive:
        archive.extractall(folder)
    env = {"ADK_DATABASE": postgres_server.url.removeprefix("postgresql://")}
    log = tmp_path / "log"

    with Container(folder, {"PATH": os.environ["PATH"], **env}) as container:
        made = container.invoke(http_event(f"/apps/helper/users/{USER}/sessions", "POST", {}))
        assert made["statusCode"] == 200, made
        session = json.loads(made["body"])["id"]
        run = {"app_name": "helper", "user_id": USER, "session_id": session, "new_message": message("add")}
        answered = container.invoke(http_event("/run", "POST", run))
        assert answered["statusCode"] == 200, answered
        assert texts(json.loads(answered["body"])) == ["the sum is 5"]

    read = cold_container(folder, log, http_event(f"/apps/helper/users/{USER}/sessions/{session}"), env=env)[0]
    assert texts(json.loads(read["body"])["events"]) == ["add", "the sum is 5"]
