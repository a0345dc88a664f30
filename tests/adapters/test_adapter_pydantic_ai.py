"""The built-in PydanticAI adapter: agents durable unchanged (offline, with FunctionModel and TestModel)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import TypeAdapter

from agent_unit import RunStatus, use_run
from agent_unit._records import agui_usage
from agent_unit.errors import InvalidAnswer, InvalidInput
from agent_unit.run import idempotency_key
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import create_test_unit

# PydanticAI and its fixture agents are imported by the tests that use them, not here: importing it
# costs ~0.6 s of CPU, which every pytest worker would otherwise pay to collect this module.
if TYPE_CHECKING:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo


@pytest.fixture(autouse=True)
def fresh_log() -> Iterator[list[str]]:
    from ..support import pydantic_ai_fixtures as fixtures

    fixtures.LOG.clear()
    yield fixtures.LOG
    fixtures.LOG.clear()


def validated(events: list[dict[str, Any]]) -> list[str]:
    from ag_ui.core import Event

    agui = TypeAdapter(Event)
    for event in events:
        agui.validate_python({key: value for key, value in event.items() if key != "seq"})
    return [event["type"] for event in events]


async def test_a_run_streams_events_and_finishes_with_output_and_usage() -> None:
    from ..support import pydantic_ai_fixtures as fixtures

    async with create_test_unit(fixtures.AGENTS) as unit:
        done = await unit.run("charger", "charge me")
        assert done.status == RunStatus.completed and done.output == "done: charged 42"
        [usage] = done.usage  # FunctionModel estimates its tokens: two requests, summed per provider and model
        assert (usage["provider"], usage["model"]) == ("function", "scripted-charger")
        assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        events = await unit.events(done.id)
    assert validated(events) == [
        "RUN_STARTED",
        "CUSTOM",  # agent-unit.model-started
        "CUSTOM",  # agent-unit.model-finished: the model asked for the tool
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "CUSTOM",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",  # the streamed deltas, merged within delta_batch_ms
        "TEXT_MESSAGE_END",
        "CUSTOM",
        "RUN_FINISHED",
    ]
    text = "".join(event["delta"] for event in events if event["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "done: charged 42"
    assert events[3]["toolCallId"] == "call_1" and events[3]["toolCallName"] == "charge"
    assert events[-1]["usage"] == agui_usage(done.usage)


async def test_each_model_call_is_framed_by_events_with_its_own_token_usage() -> None:
    from ..support import pydantic_ai_fixtures as fixtures

    async with create_test_unit(fixtures.AGENTS) as unit:
        done = await unit.run("charger", "charge me")
        events = await unit.events(done.id)
    calls = [(event["name"], event["value"]) for event in events if event["type"] == "CUSTOM"]
    names = [name for name, _ in calls]
    assert names == ["agent-unit.model-started", "agent-unit.model-finished"] * 2
    first, second = calls[1][1], calls[3][1]
    assert calls[0][1] == {"callId": first["callId"], "name": "scripted-charger"}
    assert first["callId"] != second["callId"]
    spent = [first["usage"], second["usage"]]  # per call: together they are the run's usage
    assert all(entry["model"] == "scripted-charger" and entry["inputTokens"] > 0 for entry in spent)
    total = sum(entry["inputTokens"] for entry in spent)
    assert total == done.usage[0]["input_tokens"]
    assert events[1]["timestamp"] <= events[2]["timestamp"]  # when it started, when it answered


async def test_a_replayed_model_call_emits_no_model_events_again() -> None:
    from ..support import pydantic_ai_fixtures as fixtures

    async with create_test_unit(fixtures.AGENTS) as unit:
        asked = await unit.run("asker", "a shirt")
        assert asked.status == RunStatus.interrupted
        resumed = await unit.resume(asked.id, {"size": "M"})
        assert resumed.status == RunStatus.completed
        events = await unit.events(asked.id)
    started = [event["value"]["callId"] for event in events if event.get("name") == "agent-unit.model-started"]
    finished = [event["value"]["callId"] for event in events if event.get("name") == "agent-unit.model-finished"]
    assert started == finished and len(started) == len(set(started)) == 2  # the replayed first call: not again


async def test_structured_output_is_the_runs_output() -> None:
    from ..support import pydantic_ai_fixtures as fixtures

    async with create_test_unit(fixtures.AGENTS) as unit:
        done = await unit.run("invoicer", {"prompt": "bill them"})
    assert done.status == RunStatus.completed
    assert done.output == {"number": "INV-7", "total": 12.5}


async def test_bad_input_is_refused_before_a_run_exists() -> None:
    from ..support import pydantic_ai_fixtures as fixtures

    async with create_test_unit(fixtures.AGENTS) as unit:
        with pytest.raises(InvalidInput, match="prompt"):
            await unit.run("charger", {"text": "no prompt"})
        assert (await unit.engine.list()).runs == []
        manifest = unit.engine.agents["charger"]
        assert manifest.framework == "pydantic-ai"
        assert manifest.input_schema["required"] == ["prompt"]


async def test_approval_survives_a_restart_and_repeats_nothing(tmp_path: Path, fresh_log: list[str]) -> None:
    from ..support import pydantic_ai_fixtures as fixtures

    first = create_test_unit(fixtures.AGENTS, SQLiteStore(tmp_path / "runs.db"))
    parked = await first.run("support", "refund my order")
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None
    assert parked.interrupt.name == "tool-approval"
    assert parked.interrupt.payload == {
        "call_id": "call_1",
        "tool": "refund",
        "arguments": {"order_id": "o_1"},
        "agent": "support",
    }
    await first.close()
    await first.store.close()
    assert fresh_log == ["model support 1"]

    second = create_test_unit(fixtures.AGENTS, SQLiteStore(tmp_path / "runs.db"))
    with pytest.raises(InvalidAnswer, match="tool-approval"):
        await second.resume(parked.id, "yes please")  # not true, false or {"approved": ...}: stays parked
    assert (await second.get(parked.id)).status == RunStatus.interrupted
    done = await second.resume(parked.id, True)
    await second.close()
    await second.store.close()
    assert done.status == RunStatus.completed and done.output == "done: refunded o_1"
    key = idempotency_key(parked.id, "tool:refund#call_1")
    assert fresh_log == ["model support 1", f"refund o_1 {key}", "model support 3"]  # model call 1 replayed
    assert [entry["model"] for entry in done.usage] == ["scripted-support"]
    assert done.usage[0]["input_tokens"] > 0


async def test_a_declined_approval_runs_nothing_and_the_model_is_told(fresh_log: list[str]) -> None:
    from ..support import pydantic_ai_fixtures as fixtures

    async with create_test_unit(fixtures.AGENTS) as unit:
        parked = await unit.run("support", "refund my order")
        done = await unit.resume(parked.id, {"approved": False, "reason": "not this one"})
    assert done.status == RunStatus.completed and done.output == "done: not this one"
    assert not any(line.startswith("refund") for line in fresh_log)

    async with create_test_unit(fixtures.AGENTS) as unit:
        parked = await unit.run("support", "refund my order")
        done = await unit.resume(parked.id, False)
    assert done.output == "done: The tool call was denied."  # PydanticAI's own ToolDenied message


async def test_use_run_interrupt_inside_a_tool(fresh_log: list[str]) -> None:
    from ..support import pydantic_ai_fixtures as fixtures

    async with create_test_unit(fixtures.AGENTS) as unit:
        parked = await unit.run("asker", "a shirt please")
        assert parked.status == RunStatus.interrupted and parked.interrupt is not None
        assert parked.interrupt.name == "pick-size" and parked.interrupt.payload == {"color": "blue"}
        done = await unit.resume(parked.id, {"size": "L"})
    assert done.output == "done: ordered a L blue shirt"
    assert fresh_log == ["model asker 1", "order blue L", "model asker 3"]


async def test_a_conversation_continues_on_its_thread() -> None:
    from ..support import pydantic_ai_fixtures as fixtures

    async with create_test_unit(fixtures.AGENTS) as unit:
        first = await unit.run("chat", "hello", thread_id="t_1")
        second = await unit.run("chat", "again", thread_id="t_1")
        other = await unit.run("chat", "elsewhere", thread_id="t_2")
    assert first.output == "hello"
    assert second.output == "hello | again"
    assert other.output == "elsewhere"


async def test_a_changed_request_on_replay_is_a_clear_error(tmp_path: Path) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("refund", {"order_id": "o_1"}, tool_call_id="call_1")])
        return ModelResponse(parts=[TextPart("ok")])

    def build(instructions: str) -> Agent[None, str]:
        agent = Agent(FunctionModel(model), instructions=instructions)

        @agent.tool_plain(requires_approval=True)
        def refund(order_id: str) -> str:
            return "refunded"

        return agent

    store = SQLiteStore(tmp_path / "runs.db")
    async with create_test_unit({"support": build("Be kind.")}, store) as unit:
        parked = await unit.run("support", "refund")
    async with create_test_unit({"support": build("Be brief.")}, store) as unit:  # the code changed meanwhile
        failed = await unit.resume(parked.id, True)
    await store.close()
    assert failed.status == RunStatus.failed and failed.error is not None
    assert failed.error.type == "NonDeterminismError"
    assert "'support'" in failed.error.message and "model:" in failed.error.message


async def test_parallel_tool_calls_are_each_journaled_once(tmp_path: Path) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    effects: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("ship", {"box": "a"}, tool_call_id="call_a"),
                    ToolCallPart("ship", {"box": "b"}, tool_call_id="call_b"),
                ]
            )
        return ModelResponse(parts=[TextPart("shipped")])

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    async def ship(box: str) -> str:
        effects.append(f"{box} {use_run().idempotency_key()}")
        await asyncio.sleep(0.01)
        return f"shipped {box}"

    async with create_test_unit({"shipper": agent}) as unit:
        done = await unit.run("shipper", "ship both")
    assert done.output == "shipped"
    assert sorted(effects) == [
        f"a {idempotency_key(done.id, 'tool:ship#call_a')}",
        f"b {idempotency_key(done.id, 'tool:ship#call_b')}",
    ]


async def test_mcp_toolset_calls_are_journaled_and_not_repeated_after_a_restart(tmp_path: Path) -> None:
    from fastmcp import FastMCP
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    shipped: list[str] = []
    server = FastMCP("shop")

    @server.tool
    def ship(box: str) -> str:
        shipped.append(box)
        return f"shipped {box}"

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("ship", {"box": "a"}, tool_call_id="call_ship")])
        if len(messages) == 3:
            return ModelResponse(parts=[ToolCallPart("refund", {"order_id": "o_1"}, tool_call_id="call_refund")])
        return ModelResponse(parts=[TextPart("done")])

    def build() -> Agent[None, str]:
        agent = Agent(FunctionModel(model), toolsets=[MCPToolset(server)])

        @agent.tool_plain(requires_approval=True)
        def refund(order_id: str) -> str:
            return "refunded"

        return agent

    store = SQLiteStore(tmp_path / "runs.db")
    async with create_test_unit({"shop": build()}, store) as unit:
        parked = await unit.run("shop", "ship, then refund")
        assert parked.status == RunStatus.interrupted and shipped == ["a"]
        events = await unit.events(parked.id)
        # the MCP call, then the call that waits for approval, shown before the park
        assert [e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"] == ["ship", "refund"]
    async with create_test_unit({"shop": build()}, store) as unit:  # a restarted process
        done = await unit.resume(parked.id, True)
    await store.close()
    assert done.status == RunStatus.completed and done.output == "done"
    assert shipped == ["a"]  # the MCP server's tool ran once: the replay answered from the journal
