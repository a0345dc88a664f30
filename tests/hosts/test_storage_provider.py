"""A store URL wholly from the environment: the build vendors the driver the table form names.

CI pipelines build without production secrets, so ``storage = { provider = "postgres",
url = "${DATABASE_URL}" }`` tells the build which driver to vendor; the variable's own scheme
wins when it is set, and a built server started with another kind of URL says so in one line.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent_unit.errors import BuildError, StoreConfigError
from agent_unit_cli.build import storage_scheme
from agent_unit_cli.main import app

from ..support import fetch
from ..support.server import free_port, wait_until_up

FIXTURES = Path(__file__).resolve().parents[1] / "support" / "fixtures"
runner = CliRunner()
TABLE = 'storage = { provider = "postgres", url = "${AU_TEST_DATABASE_URL}" }\n'


def _project(tmp_path: Path, config: str) -> Path:
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "project_ok", project)
    (project / "agent-unit.toml").write_text(config)
    return project


def _build(project: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["build", "--root", str(project), "--json", *args])
    return result.exit_code, json.loads(result.stdout)


def test_the_table_form_names_the_driver_when_the_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AU_TEST_DATABASE_URL", raising=False)
    assert storage_scheme("${AU_TEST_DATABASE_URL}", "postgres") == "postgres"


def test_the_variables_scheme_is_used_when_it_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AU_TEST_DATABASE_URL", "postgresql://app@db/runs")
    assert storage_scheme("${AU_TEST_DATABASE_URL}", "postgres") == "postgresql"


def test_a_provider_that_disagrees_with_the_variable_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AU_TEST_DATABASE_URL", "redis://cache:6379")
    with pytest.raises(BuildError) as caught:
        storage_scheme("${AU_TEST_DATABASE_URL}", "postgres")
    message = str(caught.value)
    assert 'provider = "postgres"' in message and "AU_TEST_DATABASE_URL is a redis:// URL" in message


def test_without_provider_or_variable_the_error_shows_the_form_to_write(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AU_TEST_DATABASE_URL", raising=False)
    with pytest.raises(BuildError) as caught:
        storage_scheme("${AU_TEST_DATABASE_URL}")
    assert 'storage = { provider = "postgres", url = "${AU_TEST_DATABASE_URL}" }' in str(caught.value)


def test_an_unknown_provider_is_refused_by_the_config(tmp_path: Path) -> None:
    project = _project(tmp_path, 'storage = { provider = "mongo", url = "${X}" }\n')
    code, result = _build(project)
    assert code == 1 and result["error"].startswith("agent-unit.toml: storage.provider: Input should be 'memory'")


def test_netlify_never_refuses_a_storage_url_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AU_TEST_DATABASE_URL", raising=False)
    project = _project(tmp_path, 'storage = "${AU_TEST_DATABASE_URL}"\norigin = "https://agents.example.com"\n')
    code, result = _build(project, "--preset", "netlify")
    assert code == 0, result


def test_a_built_server_vendors_the_named_driver_and_refuses_another_scheme_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    monkeypatch.delenv("AU_TEST_DATABASE_URL", raising=False)
    code, result = _build(_project(tmp_path, TABLE))
    assert code == 0, result
    output = tmp_path / "moved"  # a moved copy, started with no site-packages: only what the build vendored
    shutil.move(result["output"], output)
    assert (output / "vendor" / "psycopg").is_dir() and not (output / "vendor" / "redis").exists()
    environment = {"PATH": os.environ["PATH"], "PORT": "1", "AU_TEST_DATABASE_URL": "redis://127.0.0.1:1"}
    started = subprocess.run(
        [sys.executable, "-I", "-S", "main.py"], cwd=output, env=environment, capture_output=True, text=True, timeout=60
    )
    assert started.returncode == 1
    lines = started.stderr.strip().splitlines()
    assert len(lines) == 1, started.stderr
    assert "redis:// URL" in lines[0] and "built for postgres" in lines[0]

    # With the URL of the kind it was built for, set only when it starts, the same copy serves.
    port = free_port()
    environment = {"PATH": os.environ["PATH"], "PORT": str(port), "AU_TEST_DATABASE_URL": postgres_url}
    server = subprocess.Popen([sys.executable, "-I", "-S", "main.py"], cwd=output, env=environment)
    try:
        wait_until_up(f"http://127.0.0.1:{port}")
        assert fetch.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_a_store_of_another_kind_whose_driver_is_here_is_logged_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    from agent_unit.stores import check_built_store

    with caplog.at_level(logging.WARNING, logger="agent_unit"):
        check_built_store("sqlite:///runs.db", "postgres")
        check_built_store("postgresql://app@db/runs", "postgres")  # the same driver: nothing to say
    assert [record.getMessage().count("\n") for record in caplog.records] == [0]
    assert "sqlite:// URL" in caplog.records[0].getMessage()


def test_a_store_of_another_kind_whose_driver_is_missing_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent_unit.stores import check_built_store

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as in a build that vendored only redis
    with pytest.raises(StoreConfigError, match=r"^storage is a postgres:// URL, but this app was built for redis"):
        check_built_store("postgres://app@db/runs", "redis")
