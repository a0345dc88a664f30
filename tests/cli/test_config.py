"""agent-unit.toml and [tool.agent-unit]: defaults, values, and errors that name the key and file."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_unit.errors import ConfigError
from agent_unit_cli.config import load_config


def test_defaults_without_a_file(tmp_path: Path) -> None:
    config, source = load_config(tmp_path)
    assert source is None and config.preset == "server" and config.storage is None and config.base_path == "/"


def test_agent_unit_toml(tmp_path: Path) -> None:
    (tmp_path / "agent-unit.toml").write_text(
        'name = "support"\nstorage = "${REDIS_URL}"\nbudget = "60s"\nsweep = false\nbase_path = "/api/agents"\n'
        'authorize = "app.auth:authorize"\nretention = "30d"\nmax_body_bytes = 2_000_000\n'
        'allowed_origins = ["https://app.example.com"]\nallowed_hosts = ["agents.example.com", ".example.net"]\n'
        '[tasks.send-digest]\nschedule = "0 8 * * *"\nhandler = "app.tasks:send_digest"\n'
    )
    config, source = load_config(tmp_path)
    assert source == tmp_path / "agent-unit.toml"
    assert (config.name, config.storage, config.budget, config.sweep) == ("support", "${REDIS_URL}", "60s", False)
    assert config.tasks["send-digest"].handler == "app.tasks:send_digest"
    assert config.allowed_origins == ["https://app.example.com"]
    assert config.allowed_hosts == ["agents.example.com", ".example.net"]


def test_pyproject_section(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.agent-unit]\npreset = "docker"\n')
    config, source = load_config(tmp_path)
    assert config.preset == "docker" and source == tmp_path / "pyproject.toml"


def test_overrides_win(tmp_path: Path) -> None:
    (tmp_path / "agent-unit.toml").write_text('preset = "docker"\n')
    assert load_config(tmp_path, preset="server", storage=None)[0].preset == "server"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("storge = 'x'\n", "agent-unit.toml: storge: unknown key"),
        ("storag = 'x'\n", "agent-unit.toml: storag: unknown key: did you mean storage?"),
        ("[cloudflare]\nruntim = 'default'\n", "agent-unit.toml: cloudflare.runtim: unknown key: did you mean runtime"),
        ("max_body_bytes = 'big'\n", "agent-unit.toml: max_body_bytes: Input should be a valid integer"),
        ("budget = '2 fortnights'\n", "agent-unit.toml: budget: Value error, invalid duration '2 fortnights'"),
        ("sweep = 'hourly'\n", "agent-unit.toml: sweep: Value error, must be a cron expression"),
        ("authorize = 'app.auth'\n", "agent-unit.toml: authorize: String should match pattern"),
        ("[tasks.x]\nschedule = '* * * * *'\n", "agent-unit.toml: tasks.x.handler: Field required"),
        ("allowed_origins = ['https://a.example/path']\n", "agent-unit.toml: allowed_origins: Value error, allowed_"),
        (
            "allowed_hosts = ['https://agents.example.com']\n",
            "agent-unit.toml: allowed_hosts: Value error, allowed_hosts: 'https://agents.example.com' is not a host",
        ),
        ("name = \n", "agent-unit.toml is not valid TOML"),
        ("host_guard = false\n", "agent-unit.toml: host_guard = false applies to a `server` app only"),
    ],
)
def test_errors_name_the_key_and_the_file(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "agent-unit.toml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert str(caught.value).startswith(message)


def test_pyproject_errors_name_the_section(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.agent-unit]\nbase_path = 'api'\n")
    with pytest.raises(ConfigError, match=r"pyproject.toml \[tool.agent-unit\]: base_path: Value error, must start"):
        load_config(tmp_path)
