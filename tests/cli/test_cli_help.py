"""Every command's help reads as a user expects: flags as flags, the presets from the registry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer
from typer.testing import CliRunner

from agent_unit import __version__
from agent_unit_cli.main import app
from agent_unit_cli.presets import PRESETS

runner = CliRunner()


def _paths(command: click.Command, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found += _paths(sub, (*prefix, name))
    return found


@pytest.mark.parametrize("path", _paths(typer.main.get_command(app)), ids=lambda path: " ".join(path) or "agent-unit")
def test_no_flag_shows_a_bool_placeholder(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "--help" in result.output and "<bool>" not in result.output


def test_build_help_lists_every_preset() -> None:
    result = runner.invoke(app, ["build", "--help"], env={"COLUMNS": "300"})
    assert all(name in result.output for name in PRESETS) and "cloudflare" in result.output


@pytest.mark.parametrize("module", ["agent_unit_cli", "agent_unit_cli.main"])
def test_python_dash_m_runs_the_command_from_either_module(module: str) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", module, "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=60,
    )
    assert (done.returncode, done.stdout.strip()) == (0, f"agent-unit {__version__}"), done.stderr
