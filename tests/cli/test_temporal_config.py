"""``[temporal]`` in the configuration: what it selects, and where it is refused with one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_unit_cli.config import load_config
from agent_unit_cli.main import app

runner = CliRunner()

AGENT = "from agent_unit import define_agent\n\n@define_agent\nasync def agent(input: dict) -> str:\n    return 'ok'\n"
TABLE = '[temporal]\naddress = "${TEMPORAL_ADDRESS}"\nnamespace = "agents"\ntask_queue = "refunds"\n'


def project(tmp_path: Path, config: str) -> Path:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "refund.py").write_text(AGENT)
    (tmp_path / "agent-unit.toml").write_text(config)
    return tmp_path


def test_a_temporal_table_selects_the_temporal_engine_with_its_values_as_written(tmp_path: Path) -> None:
    config, _ = load_config(project(tmp_path, TABLE))
    assert config.temporal_table == {
        "address": "${TEMPORAL_ADDRESS}",  # expanded where the app starts, never in a build
        "namespace": "agents",
        "task_queue": "refunds",
        "heartbeat": "30s",
        "search_attributes": False,
    }


def test_engine_temporal_alone_means_a_local_temporal_server_and_no_table_means_the_native_engine(
    tmp_path: Path,
) -> None:
    config, _ = load_config(project(tmp_path, 'engine = "temporal"\n'))
    assert config.temporal_table is not None and config.temporal_table["address"] == "localhost:7233"
    assert load_config(tmp_path, engine="native")[0].temporal_table is None


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ('engine = "native"\n' + TABLE, 'engine = "native" with a [temporal] table: remove one of them'),
        ('[temporal]\nadress = "x:1"\n', "temporal.adress: unknown key: did you mean address?"),
        ('[temporal]\nheartbeat = "soon"\n', "temporal.heartbeat"),
    ],
)
def test_a_temporal_table_that_cannot_work_is_one_line_naming_the_key(
    tmp_path: Path, config: str, message: str
) -> None:
    result = runner.invoke(app, ["agents", "--root", str(project(tmp_path, config))])
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("preset", ["aws-lambda", "vercel", "netlify", "cloudflare"])
def test_hosts_that_keep_no_process_alive_refuse_temporal_in_one_line_saying_what_to_build_instead(
    tmp_path: Path, preset: str
) -> None:
    root = project(tmp_path, 'storage = "postgres://db/agents"\n' + TABLE)
    result = runner.invoke(app, ["build", "--root", str(root), "--preset", preset, "--origin", "https://x.example"])
    assert result.exit_code == 1, result.output
    line = f"the {preset} preset cannot run [temporal]: its host keeps no process alive to hold a Temporal worker"
    assert line in " ".join(result.output.split())
    assert "--preset server or docker" in result.output
    assert "Traceback" not in result.output


def test_the_worker_command_without_temporal_says_what_to_add(tmp_path: Path) -> None:
    result = runner.invoke(app, ["worker", "--root", str(project(tmp_path, 'name = "x"\n'))])
    assert result.exit_code == 1
    assert "agent-unit worker runs Temporal workers: add a [temporal] table" in " ".join(result.output.split())


def test_the_worker_command_names_an_unset_variable_of_the_table(tmp_path: Path) -> None:
    root = project(tmp_path, '[temporal]\naddress = "${NOT_SET_IN_ANY_TEST}"\n')
    result = runner.invoke(app, ["worker", "--root", str(root)])
    assert result.exit_code == 1
    assert "[temporal] address needs ${NOT_SET_IN_ANY_TEST}, which is not set" in " ".join(result.output.split())
