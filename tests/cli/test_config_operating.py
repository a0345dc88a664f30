"""The configuration of operating runs: approval deadlines, who answers, spending limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_unit.errors import ConfigError
from agent_unit_cli.config import load_config


def test_operating_keys_are_read_and_checked(tmp_path: Path) -> None:
    (tmp_path / "agent-unit.toml").write_text(
        'approval_timeout = "1d"\nrequire_answerer = true\n[limits]\ntotal_tokens = 5000\non_limit = "fail"\n'
    )
    config, _ = load_config(tmp_path)
    assert config.approval_timeout == "1d" and config.require_answerer is True
    assert config.limits is not None and config.limits.total_tokens == 5000 and config.limits.on_limit == "fail"


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('approval_timeout = "soon"', "approval_timeout: Value error, invalid duration 'soon'"),
        ("[limits]\ndollars = 5", "limits.dollars: unknown key"),
        ("[limits]\nmodel_calls = -1", "limits.model_calls: Input should be greater than or equal to 0"),
    ],
)
def test_a_wrong_operating_key_names_itself(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "agent-unit.toml").write_text(toml + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert message in str(caught.value)
