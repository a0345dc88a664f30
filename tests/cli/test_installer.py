"""Which installer vendors a build: pip, or uv for a project that uses it (``AGENT_UNIT_INSTALLER`` decides first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_unit.errors import PipError
from agent_unit_cli import pip
from agent_unit_cli.pip import for_host, installer, linux_wheels, uv_binary


def test_a_project_with_a_uv_lock_vendors_with_uv_and_others_with_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_UNIT_INSTALLER", raising=False)
    assert uv_binary() is not None  # the dev extra installs it
    assert installer(tmp_path) == "pip"
    (tmp_path / "uv.lock").write_text("version = 1\n")
    assert installer(tmp_path) == "uv"
    monkeypatch.setenv("AGENT_UNIT_INSTALLER", "pip")
    assert installer(tmp_path) == "pip"


def test_the_variable_chooses_uv_and_a_wrong_value_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_UNIT_INSTALLER", "UV")
    assert installer(tmp_path) == "uv"
    monkeypatch.setenv("AGENT_UNIT_INSTALLER", "poetry")
    with pytest.raises(PipError, match="AGENT_UNIT_INSTALLER=poetry: use pip or uv"):
        installer(tmp_path)


def test_markers_are_decided_for_the_host_the_wheels_are_for_not_for_this_machine() -> None:
    requirements = [
        'uvloop==0.21.0; sys_platform != "win32" and platform_python_implementation == "CPython"',
        'six; platform_machine == "aarch64"',
        'toml; python_version < "3.12"',
        'pywin32; sys_platform == "win32"',
        "adapter @ file:///tmp/adapter",
        "./a/local/folder",
        "httpx>=0.27",
    ]
    assert for_host(requirements, linux_wheels("aarch64", "3.13")) == [
        "uvloop==0.21.0",
        "six",
        "adapter @ file:///tmp/adapter",
        "./a/local/folder",
        "httpx>=0.27",
    ]
    assert for_host(requirements[1:3], linux_wheels("x86_64", "3.11")) == ["toml"]


def test_pip_is_given_the_requirements_decided_for_the_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    commands: list[list[str]] = []
    monkeypatch.setattr(pip, "_run", lambda command, what: commands.append(command))
    requirements = ['six; platform_machine == "aarch64"', 'toml; python_version < "3.12"']
    pip.install(requirements, tmp_path, platform=linux_wheels("aarch64", "3.13"), using="pip")
    download = commands[0]
    assert download[-1] == "six" and not any("toml" in part for part in download), download
