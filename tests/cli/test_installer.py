"""Which installer vendors a build: pip, or uv for a project that uses it (``AGENT_UNIT_INSTALLER`` decides first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_unit.errors import PipError
from agent_unit_cli.pip import installer, uv_binary


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
