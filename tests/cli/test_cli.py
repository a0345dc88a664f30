"""The ``agent-unit`` command (a first slice: version and the agents it discovers)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from agent_unit import __version__
from agent_unit_cli.main import app

FIXTURES = Path(__file__).resolve().parents[1] / "support" / "fixtures"
runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"agent-unit {__version__}"


def test_agents_lists_what_discovery_finds() -> None:
    result = runner.invoke(app, ["agents", "--root", str(FIXTURES / "project_ok")])
    assert result.exit_code == 0, result.output
    assert "refund" in result.output and "Refunds an order." in result.output and "support" in result.output


def test_agents_reports_a_discovery_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["agents", "--root", str(tmp_path)])
    assert result.exit_code == 1 and "no agents/ folder" in result.output


def test_agents_lists_framework_agents_through_configured_adapters() -> None:
    result = runner.invoke(app, ["agents", "--root", str(FIXTURES / "project_echo")])
    assert result.exit_code == 0, result.output
    assert "greeter" in result.output and "echo" in result.output
