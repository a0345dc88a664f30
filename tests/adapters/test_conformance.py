"""The adapter conformance suite: every built-in adapter runs the same scenarios, written once in
agent_unit.testing.adapters (a third-party adapter runs them the same way from its own tests).

A framework missing from this environment skips its adapter locally and fails under ``CI=true``:
no adapter is silently left untested in CI. Strands runs them from its own environment
(tests/adapters/test_adapter_strands.py): its dependencies conflict with the dev tools'.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from agent_unit.testing.adapters import SCENARIOS, AdapterSuite, Scenario

from ..support.adapter_suites import FRAMEWORKS, SUITES

pytestmark = pytest.mark.slow  # servers and killed processes

HERE = [name for name in SUITES if name != "strands"]

# A third-party adapter, as its own tests run the suite: its adapter named, not built in.
CHAT = AdapterSuite(
    agents="tests.support.chat_agents:AGENTS",
    approval="support",
    approval_input="refund my order",
    crash="charger",
    crash_input="charge me",
    adapters=("tests.support.echo_framework:chat_adapter",),
)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def _cases() -> list[object]:
    cases: list[object] = []
    for name in HERE:
        # The scenarios that apply to a suite are known without importing its framework.
        for scenario in SUITES[name].scenarios():
            cases.append(pytest.param(name, scenario, id=f"{name}-{scenario.__name__}"))
    return cases


def test_every_built_in_adapter_has_a_suite() -> None:
    from agent_unit.adapters.registry import BUILTINS

    assert sorted(SUITES) == sorted(FRAMEWORKS)
    assert sorted(FRAMEWORKS.values()) == sorted(BUILTINS)


def test_every_scenario_runs_for_every_adapter_it_applies_to() -> None:
    ran = {scenario for name in HERE for scenario in SUITES[name].scenarios()}
    assert ran == set(SCENARIOS)


@pytest.mark.parametrize(("adapter", "scenario"), _cases())
async def test_conformance(adapter: str, scenario: Scenario, tmp_path: Path) -> None:
    if not _installed(FRAMEWORKS[adapter]):
        message = f"{FRAMEWORKS[adapter]} is not installed: pip install 'agent-unit[{adapter}]'"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    await scenario(SUITES[adapter], tmp_path)


@pytest.mark.parametrize("scenario", CHAT.scenarios(), ids=lambda scenario: scenario.__name__)
async def test_a_third_party_adapter_runs_the_same_scenarios(scenario: Scenario, tmp_path: Path) -> None:
    await scenario(CHAT, tmp_path)
