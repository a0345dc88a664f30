"""An agent whose file does not load (``agent-unit dev`` serves the others): its runs wait, none is failed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_unit import Run, define_agent
from agent_unit.discovery import discover_agents, discover_project
from agent_unit.errors import AgentBroken, DiscoveryError
from agent_unit.runtime import RunEngine


@define_agent
async def nap(input: dict[str, int], run: Run) -> str:
    await run.sleep("200ms")
    return "woke"


@define_agent
async def ask(input: dict[str, int], run: Run) -> bool:
    return await run.interrupt("approve", {}, answer=bool)


async def test_a_broken_agents_parked_runs_wait_for_the_fix_and_are_never_failed(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    agents = {"nap": nap, "ask": ask}
    engine = RunEngine(agents, store, background_sweep=False)
    sleeping = await engine.start("nap", {}, wait=True)
    asked = await engine.start("ask", {}, wait=True)
    await engine.aclose()
    assert (sleeping.status.value, asked.status.value) == ("sleeping", "interrupted")
    await asyncio.sleep(0.3)  # the sleeper is due

    broken = {name: AgentBroken(f"agents/{name}.py failed to import", details={"file": name}) for name in agents}
    engine = RunEngine({}, store, broken=broken, background_sweep=False)
    try:
        await engine.sweep(wait=True)
        with pytest.raises(AgentBroken, match=r"agents/ask\.py failed to import"):
            await engine.resume(asked.id, True, wait=True)
        with pytest.raises(AgentBroken):
            await engine.start("nap", {})
        assert (await engine.get(sleeping.id)).status.value == "sleeping"
        assert (await engine.get(asked.id)).status.value == "interrupted"
        assert (await engine.list(agent="nap")).runs == [await engine.get(sleeping.id)]  # no run was started
    finally:
        await engine.aclose()

    engine = RunEngine(agents, store, background_sweep=False)  # the file is fixed
    try:
        await engine.sweep(wait=True)
        assert (await engine.get(sleeping.id)).output == "woke"
        assert (await engine.resume(asked.id, True, wait=True)).output is True
    finally:
        await engine.aclose()


def test_discovery_reports_each_broken_file_with_its_file_and_line_and_keeps_the_rest(tmp_path: Path) -> None:
    (tmp_path / "settings_of_broken").mkdir()
    (tmp_path / "settings_of_broken" / "__init__.py").write_text("")
    (tmp_path / "settings_of_broken" / "db.py").write_text("import os\n\nURL = os.environ['NOT_SET_IN_ANY_TEST']\n")
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "good.py").write_text(
        "from agent_unit import define_agent\n\n\n@define_agent\nasync def agent(input: dict) -> str:\n"
        "    return 'ok'\n"
    )
    (tmp_path / "agents" / "db.py").write_text("from settings_of_broken.db import URL\n")
    (tmp_path / "agents" / "empty.py").write_text("x = 1\n")
    found = discover_project(tmp_path)
    assert list(found.agents) == ["good"]
    assert {name: error.details for name, error in found.broken.items()} == {
        "db": {"file": "settings_of_broken/db.py", "line": 3},  # where it failed, not only the agent's file
        "empty": {"file": "agents/empty.py", "line": None},
    }
    assert all(error.code == "agent_broken" and error.status == 503 for error in found.broken.values())
    with pytest.raises(
        DiscoveryError, match=r"agents/db.py failed to import: KeyError.*\(raised at settings_of_broken/db.py:3\)"
    ):
        discover_agents(tmp_path)  # every other command still refuses a broken project
