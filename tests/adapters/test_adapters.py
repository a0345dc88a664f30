"""The adapter API: a framework's agent runs durably through its adapter, found in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_unit import RunStatus, create_agent_unit
from agent_unit.adapters import AdaptedAgent, AdapterError, define_adapter, load_adapter, resolve_agent
from agent_unit.adapters import registry as adapter_registry
from agent_unit.discovery import discover_agents
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import create_test_unit

from ..support.echo_framework import EchoAgent, echo_adapter

FIXTURES = Path(__file__).resolve().parents[1] / "support" / "fixtures"


async def test_a_framework_agent_runs_through_its_adapter() -> None:
    agent = EchoAgent("hi ")
    unit = create_test_unit({"echo": agent}, adapters=[echo_adapter])
    record = await unit.run("echo", "ann")
    assert record.status == RunStatus.completed and record.output == "hi ann"
    resolved = unit.engine.agents["echo"]
    assert isinstance(resolved, AdaptedAgent) and resolved.framework == "echo"
    assert resolved.description == "Echoes with 'hi '." and resolved.input_schema == {"type": "string"}
    types = [event["type"] for event in await unit.events(record.id)]
    assert types == ["RUN_STARTED", "CUSTOM", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]


async def test_a_pause_through_the_adapter_survives_a_restart(tmp_path: Path) -> None:
    effects: list[str] = []
    agent = EchoAgent("ok ", approve=True, effects=effects)
    first = create_test_unit({"echo": agent}, SQLiteStore(tmp_path / "runs.db"), adapters=[echo_adapter])
    parked = await first.run("echo", "refund")
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None
    assert parked.interrupt.answer_schema == {"type": "boolean"}
    await first.close()
    await first.store.close()
    second = create_test_unit({"echo": agent}, SQLiteStore(tmp_path / "runs.db"), adapters=[echo_adapter])
    done = await second.resume(parked.id, True)
    assert done.output == "ok refund" and effects == ["refund"]
    declined = await second.resume((await second.run("echo", "other")).id, False)
    assert declined.output == "declined" and effects == ["refund"]
    await second.close()
    await second.store.close()


def test_another_api_version_is_refused_clearly() -> None:
    async def run(agent: Any, ctx: Any) -> None: ...

    with pytest.raises(AdapterError, match="written for adapter API version 2, and this agent-unit speaks version 1"):
        define_adapter(name="future", api_version=2, match=lambda value: False, run=run)


def test_an_unrecognised_value_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="agent 'mystery' is a object, which no adapter recognises"):
        create_test_unit({"mystery": object()})


def test_configured_adapters_come_before_installed_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    async def run(agent: Any, ctx: Any) -> str:
        return "ours"

    ours = define_adapter(name="ours", match=lambda value: isinstance(value, EchoAgent), run=run)

    class EntryPoint:
        name, value = "echo", "tests.support.echo_framework:make_adapter"

        def load(self) -> Any:
            return load_adapter("tests.support.echo_framework:make_adapter")

    monkeypatch.setattr(adapter_registry, "entry_points", lambda group: [EntryPoint()])
    assert [adapter.name for adapter in adapter_registry.adapters([ours])] == ["ours", "echo"]
    assert resolve_agent("x", EchoAgent(""), adapter_registry.adapters([ours])).framework == "ours"  # type: ignore[union-attr]
    assert resolve_agent("x", EchoAgent(""), adapter_registry.adapters()).framework == "echo"  # type: ignore[union-attr]


def test_load_adapter_errors() -> None:
    assert load_adapter("tests.support.echo_framework:echo_adapter") is echo_adapter
    assert load_adapter("tests.support.echo_framework:make_adapter") is echo_adapter
    with pytest.raises(AdapterError, match="is not an adapter"):
        load_adapter("tests.support.echo_framework:not_an_adapter")
    with pytest.raises(AdapterError, match="cannot be loaded"):
        load_adapter("tests.nowhere:adapter")


async def test_discovery_and_http_serve_framework_agents() -> None:
    agents = discover_agents(FIXTURES / "project_echo", adapters=["tests.support.echo_framework:echo_adapter"])
    assert agents["greeter"].framework == "echo"
    app = create_agent_unit(agents, store="memory://")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        manifest = (await http.get("/agents")).json()
        assert manifest["agents"][0]["framework"] == "echo"
        done = (await http.post("/agents/greeter/runs?wait=1", json={"input": "bob"})).json()
        assert done["output"] == "hello bob"
    await app.engine.aclose()
