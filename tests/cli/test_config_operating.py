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


def test_prices_and_a_cost_limit_are_read(tmp_path: Path) -> None:
    (tmp_path / "agent-unit.toml").write_text(
        '[limits]\ncost_usd = 2.5\n[prices]\nknown = false\n[prices.models."gpt-4.1"]\ninput = 2.0\noutput = 8.0\n'
    )
    config, _ = load_config(tmp_path)
    assert config.limits is not None and config.limits.cost_usd == 2.5
    assert config.prices is not None and not config.prices.known
    assert config.prices.models["gpt-4.1"].output == 8.0


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('approval_timeout = "soon"', "approval_timeout: Value error, invalid duration 'soon'"),
        ("[limits]\ndollars = 5", "limits.dollars: unknown key"),
        ("[limits]\nmodel_calls = -1", "limits.model_calls: Input should be greater than or equal to 0"),
        ("[limits]\ncost_usd = -1", "limits.cost_usd: Input should be greater than or equal to 0"),
        ('[prices.models."gpt-4.1"]\ninput = 2', "prices.models.gpt-4.1.output: Field required"),
    ],
)
def test_a_wrong_operating_key_names_itself(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "agent-unit.toml").write_text(toml + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert message in str(caught.value)
