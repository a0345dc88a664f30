"""A mistake in the user's project is one message from every command: exit 1, no traceback.

Each broken project below runs against each command it concerns. ``dev`` creates the app and
reaches its store before it serves (``--check`` stops there), so a startup failure ends it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_unit_cli.main import app

runner = CliRunner()

AGENT = "from agent_unit import define_agent\n\n@define_agent\nasync def agent(input: dict) -> str:\n    return 'ok'\n"

BROKEN: dict[str, tuple[dict[str, str], str, tuple[str, ...]]] = {
    # name: (files, what the message says, the commands that must refuse the project)
    "bad adapter reference": (
        {
            "agents/greeter.py": "class Greeter:\n    pass\n\ngreeter = Greeter()\n",
            "agent-unit.toml": 'adapters = ["not_an_installed_adapter:adapter"]\n',
        },
        "adapter 'not_an_installed_adapter:adapter' cannot be loaded",
        ("dev", "build", "agents", "runs"),
    ),
    "agent module raising at import": (
        {"agents/refund.py": "import os\n\nTOKEN = os.environ['NOT_SET_IN_ANY_TEST']\n"},
        "agents/refund.py failed to import: KeyError: 'NOT_SET_IN_ANY_TEST' (raised at agents/refund.py:3)",
        ("dev", "build", "agents", "runs"),
    ),
    "syntax error": (
        {"agents/refund.py": AGENT + "def broken(:\n"},
        "agents/refund.py failed to import: SyntaxError",
        ("dev", "build", "agents", "runs"),
    ),
    "bad store URL": (
        {"agents/refund.py": AGENT, "agent-unit.toml": 'storage = "mysql://localhost/db"\n'},
        "unknown store URL scheme 'mysql'",
        ("dev", "runs"),
    ),
    "store URL naming an unset variable": (
        {"agents/refund.py": AGENT, "agent-unit.toml": 'storage = "postgres://${NOT_SET_IN_ANY_TEST}/db"\n'},
        "the store URL needs ${NOT_SET_IN_ANY_TEST}, which is not set",
        ("dev", "runs"),
    ),
    "authorize that cannot be imported": (
        {"agents/refund.py": AGENT, "agent-unit.toml": 'authorize = "no_such_module:check"\n'},
        "authorize = 'no_such_module:check' cannot be loaded",
        ("dev",),
    ),
    "a preset the project cannot use": (
        {"agents/refund.py": AGENT, "agent-unit.toml": 'preset = "aws-lambda"\n'},
        "the aws-lambda preset needs storage that every invocation shares",
        ("build",),
    ),
    "bad config key": (
        {"agents/refund.py": AGENT, "pyproject.toml": '[tool.agent-unit]\ncolour = "red"\n'},
        "pyproject.toml [tool.agent-unit]: colour: unknown key",  # the brackets are text, not markup
        ("dev", "build", "agents", "runs"),
    ),
}

COMMANDS = {
    "dev": ["dev", "--check"],
    "build": ["build"],
    "agents": ["agents"],
    "runs": ["runs", "resume", "run_0", "true"],
}

CASES = [(name, command) for name, (_, _, commands) in BROKEN.items() for command in commands]


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _refused(args: list[str], root: Path, message: str) -> None:
    result = runner.invoke(app, [*args, "--root", str(root)])
    assert isinstance(result.exception, SystemExit) and result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.output.strip().splitlines() == [result.output.strip()], result.output  # one message, one line
    assert result.output.startswith("error: ") and message in result.output, result.output


@pytest.mark.parametrize(("project", "command"), CASES, ids=[f"{p}-{c}" for p, c in CASES])
def test_a_broken_project_is_one_message_and_exit_1_from_every_command(
    tmp_path: Path, project: str, command: str
) -> None:
    files, message, _ = BROKEN[project]
    _refused(COMMANDS[command], _project(tmp_path, files), message)


@pytest.mark.parametrize("command", ["dev", "runs"])
def test_a_missing_store_driver_says_which_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    for name in ["redis", "redis.asyncio", *(name for name in sys.modules if name.startswith("redis."))]:
        monkeypatch.setitem(sys.modules, name, None)  # as if the redis package were not installed
    monkeypatch.delitem(sys.modules, "agent_unit.stores.redis", raising=False)
    root = _project(tmp_path, {"agents/refund.py": AGENT, "agent-unit.toml": 'storage = "redis://127.0.0.1:1/0"\n'})
    _refused(COMMANDS[command], root, 'pip install "agent-unit[redis]"')


def test_dev_check_starts_the_app_reaches_its_store_and_exits_0(tmp_path: Path) -> None:
    root = _project(tmp_path, {"agents/refund.py": AGENT})
    result = runner.invoke(app, ["dev", "--check", "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert "refund" in result.output and result.output.strip().endswith("the app starts and its store answers")
    assert (root / ".agent-unit" / "agent-unit.db").is_file()


def test_build_json_reports_a_broken_project_as_json_on_stdout(tmp_path: Path) -> None:
    files, message, _ = BROKEN["bad adapter reference"]
    root = _project(tmp_path, files)
    result = runner.invoke(app, ["build", "--json", "--root", str(root)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert message in json.loads(result.stdout)["error"]
