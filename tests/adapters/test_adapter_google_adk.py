"""The Google ADK adapter: journaled model calls and tools, confirmations, restarts, crashes, threads.

Every model here is scripted (tests/support/google_adk_fixtures.py): nothing touches the network.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import TypeAdapter

from agent_unit import RunStatus, use_run
from agent_unit._events import MODEL_FINISHED, MODEL_STARTED
from agent_unit._records import agui_usage
from agent_unit.adapters.registry import builtin_adapters
from agent_unit.errors import InvalidAnswer, InvalidInput
from agent_unit.run import idempotency_key
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import create_test_unit

# ADK, its adapter and the fixture agents are imported by the tests that use them, not here:
# importing them costs ~0.5 s of CPU, which every pytest worker would otherwise pay to collect this
# module.
if TYPE_CHECKING:
    from google.adk.models import LlmRequest
    from google.adk.tools import ToolContext


@pytest.fixture(autouse=True)
def fresh_log() -> Iterator[list[str]]:
    from ..support import google_adk_fixtures as fixtures

    fixtures.LOG.clear()
    yield fixtures.LOG
    fixtures.LOG.clear()


def without_model_frames(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events without the model-call frames, which these tests do not count."""
    return [event for event in events if event.get("name") not in (MODEL_STARTED, MODEL_FINISHED)]


def validated(events: list[dict[str, Any]]) -> list[str]:
    from ag_ui.core import Event

    agui = TypeAdapter(Event)
    for event in events:
        agui.validate_python({key: value for key, value in event.items() if key != "seq"})
    return [event["type"] for event in events]


def test_the_builtin_registry_picks_the_adapter_for_an_adk_agent() -> None:
    from agent_unit.adapters.google_adk import adapter

    from ..support import google_adk_fixtures as fixtures

    chosen = [each for each in builtin_adapters() if each.match(fixtures.support)]
    assert [each.name for each in chosen] == ["google-adk"]
    described = adapter.adapt(fixtures.support)
    assert described.description == "Refunds orders."
    assert described.input_schema["required"] == ["prompt"]


async def test_a_run_streams_ag_ui_events_and_finishes_with_output_and_usage() -> None:
    from ..support import google_adk_fixtures as fixtures

    async with create_test_unit(fixtures.AGENTS) as unit:
        done = await unit.run("charger", "charge me")
        assert done.status == RunStatus.completed, done.error
        assert done.output == "done: charged 42"
        assert done.usage == [
            {
                "provider": "ScriptedLlm",
                "model": "scripted-charger",
                "input_tokens": 20,
                "output_tokens": 10,
                "total_tokens": 30,
            }
        ]
        events = await unit.events(done.id)
    assert validated(without_model_frames(events)) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",  # the streamed chunks, merged within delta_batch_ms
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    by_type = {event["type"]: event for event in events}
    assert (
        by_type["TOOL_CALL_START"]["toolCallId"] == "call_1" and by_type["TOOL_CALL_START"]["toolCallName"] == "charge"
    )
    assert by_type["TOOL_CALL_ARGS"]["delta"] == '{"amount": 42}'
    text = "".join(event["delta"] for event in events if event["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "done: charged 42"
    assert by_type["RUN_FINISHED"]["result"] == "done: charged 42"
    assert by_type["RUN_FINISHED"]["usage"] == agui_usage(done.usage)


async def test_reasoning_parts_stream_as_reasoning_events() -> None:
    from google.adk.agents import Agent
    from google.genai import types

    from ..support.google_adk_fixtures import ScriptedLlm

    def think(request: LlmRequest) -> list[types.Part]:
        return [types.Part(text="let me see", thought=True), types.Part(text="42")]

    agent = Agent(name="thinker", model=ScriptedLlm(model="scripted-thinker", script=think))
    async with create_test_unit({"thinker": agent}) as unit:
        done = await unit.run("thinker", "what is it")
        events = await unit.events(done.id)
    assert done.output == "42"
    assert validated(without_model_frames(events)) == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]


async def test_structured_output_is_the_runs_output() -> None:
    from ..support import google_adk_fixtures as fixtures

    async with create_test_unit(fixtures.AGENTS) as unit:
        done = await unit.run("invoicer", {"prompt": "bill them"})
    assert done.status == RunStatus.completed, done.error
    assert done.output == {"number": "INV-7", "total": 12.5}


async def test_bad_input_is_refused_before_a_run_exists() -> None:
    from ..support import google_adk_fixtures as fixtures

    async with create_test_unit(fixtures.AGENTS) as unit:
        with pytest.raises(InvalidInput, match="prompt"):
            await unit.run("charger", {"text": "no prompt"})
        assert (await unit.engine.list()).runs == []
        assert unit.engine.agents["charger"].framework == "google-adk"


async def test_a_confirmation_survives_a_restart_and_repeats_nothing(tmp_path: Path, fresh_log: list[str]) -> None:
    from ..support import google_adk_fixtures as fixtures

    first = create_test_unit(fixtures.AGENTS, SQLiteStore(tmp_path / "runs.db"))
    parked = await first.run("support", "refund my order")
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None, parked.error
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
    done = await second.resume(parked.id, True)
    events = await second.events(parked.id)
    await second.close()
    await second.store.close()
    assert done.status == RunStatus.completed and done.output == "done: refunded o_1"
    key = idempotency_key(parked.id, "tool:refund#call_1")
    assert fresh_log == ["model support 1", f"refund o_1 {key}", "model support 3"]  # model call 1 replayed
    resumed = [event["type"] for event in events]
    assert resumed[resumed.index("RUN_INTERRUPTED") + 1 :][:2] == ["RUN_STARTED", "TOOL_CALL_RESULT"]
    assert [entry["model"] for entry in done.usage] == ["scripted-support"]
    assert done.usage[0]["input_tokens"] == 20  # both calls counted, the replayed one included


async def test_a_declined_confirmation_runs_nothing_and_the_model_gets_adks_rejection(fresh_log: list[str]) -> None:
    from agent_unit.adapters.google_adk import REJECTED

    from ..support import google_adk_fixtures as fixtures

    async with create_test_unit(fixtures.AGENTS) as unit:
        parked = await unit.run("support", "refund my order")
        done = await unit.resume(parked.id, {"approved": False, "reason": "not this one"})
    assert done.status == RunStatus.completed, done.error
    assert done.output == f"done: {REJECTED} Reason: not this one"
    assert not any(line.startswith("refund") for line in fresh_log)

    async with create_test_unit(fixtures.AGENTS) as unit:
        parked = await unit.run("support", "refund my order")
        done = await unit.resume(parked.id, False)
    assert done.output == "done: This tool call is rejected."  # ADK's own words for a declined confirmation


async def test_a_tool_that_asks_for_confirmation_itself_pauses_and_is_called_again_with_the_answer(
    tmp_path: Path, fresh_log: list[str]
) -> None:
    from ..support import google_adk_fixtures as fixtures

    store = SQLiteStore(tmp_path / "runs.db")
    async with create_test_unit(fixtures.AGENTS, store) as unit:
        parked = await unit.run("banker", "send 7")
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None, parked.error
    assert parked.interrupt.payload == {
        "call_id": "call_1",
        "tool": "transfer",
        "arguments": {"amount": 7},
        "agent": "banker",
    }
    async with create_test_unit(fixtures.AGENTS, store) as unit:  # a restarted process
        done = await unit.resume(parked.id, True)
        declined = await unit.resume((await unit.run("banker", "send 7")).id, False)
    await store.close()
    assert done.status == RunStatus.completed and done.output == "done: transferred 7", done.error
    key = idempotency_key(parked.id, "tool:transfer#call_1:confirmed")
    assert fresh_log == ["model banker 1", f"transfer 7 {key}", "model banker 3", "model banker 1", "model banker 3"]
    assert declined.output == "done: not transferred (asked: transfer 7?)"  # the tool heard ADK's ToolConfirmation


async def test_what_a_tool_does_to_the_session_state_is_replayed_with_its_result(tmp_path: Path) -> None:
    from google.adk.agents import Agent
    from google.adk.tools import FunctionTool
    from google.genai import types

    from ..support import google_adk_fixtures as fixtures
    from ..support.google_adk_fixtures import ScriptedLlm, call, responses

    remembered: list[str] = []

    def script(request: LlmRequest) -> list[types.Part]:
        answered = responses(request)
        if not answered:
            return [call("remember", {"order_id": "o_1"}, "call_m")]
        if "result" in answered[0] and answered[0]["result"] == "noted":
            return [call("refund", {"order_id": "o_1"}, "call_r")]
        return [types.Part(text=f"done: {answered[0]['result']}")]

    def remember(order_id: str, tool_context: ToolContext) -> str:
        """Notes the order."""
        remembered.append(order_id)
        tool_context.state["order"] = order_id
        return "noted"

    agent = Agent(
        name="stateful",
        model=ScriptedLlm(model="scripted-stateful", script=script),
        instruction="The order is {order?}.",  # ADK fills it from the session state
        tools=[remember, FunctionTool(fixtures.refund, require_confirmation=True)],
    )
    store = SQLiteStore(tmp_path / "runs.db")
    async with create_test_unit({"stateful": agent}, store) as unit:
        parked = await unit.run("stateful", "refund o_1")
    assert parked.status == RunStatus.interrupted, parked.error
    async with create_test_unit({"stateful": agent}, store) as unit:  # a restart: the state comes from the journal
        done = await unit.resume(parked.id, True)
    await store.close()
    assert done.status == RunStatus.completed and done.output == "done: refunded o_1", done.error
    assert remembered == ["o_1"]


async def test_a_conversation_continues_on_its_thread() -> None:
    from ..support import google_adk_fixtures as fixtures

    async with create_test_unit(fixtures.AGENTS) as unit:
        first = await unit.run("chat", "hello", thread_id="t_1")
        second = await unit.run("chat", "again", thread_id="t_1")
        other = await unit.run("chat", "elsewhere", thread_id="t_2")
    assert first.output == "hello"
    assert second.output == "hello | again"
    assert other.output == "elsewhere"


async def test_parallel_tool_calls_are_each_journaled_once_with_their_own_key(tmp_path: Path) -> None:
    from google.adk.agents import Agent
    from google.adk.tools import FunctionTool
    from google.genai import types

    from ..support.google_adk_fixtures import ScriptedLlm, call, responses

    effects: list[str] = []

    def script(request: LlmRequest) -> list[types.Part]:
        if not responses(request):
            return [call("ship", {"box": "a"}, "call_a"), call("ship", {"box": "b"}, "call_b")]
        return [types.Part(text="shipped")]

    async def ship(box: str) -> str:
        """Ships a box."""
        effects.append(f"{box} {use_run().idempotency_key()}")
        await asyncio.sleep(0.2 if box == "a" else 0)  # still running when b pauses
        return f"shipped {box}"

    def confirm(box: str) -> bool:
        return box == "b"

    agent = Agent(
        name="shipper",
        model=ScriptedLlm(model="scripted-shipper", script=script),
        tools=[FunctionTool(ship, require_confirmation=confirm)],  # only box b asks
    )
    store = SQLiteStore(tmp_path / "runs.db")
    async with create_test_unit({"shipper": agent}, store) as unit:
        parked = await unit.run("shipper", "ship both")
        assert parked.status == RunStatus.interrupted and parked.interrupt is not None, parked.error
        assert parked.interrupt.payload["call_id"] == "call_b"
    async with create_test_unit({"shipper": agent}, store) as unit:
        done = await unit.resume(parked.id, True)
    await store.close()
    assert done.status == RunStatus.completed and done.output == "shipped"
    assert effects == [  # a ran once, before the pause; b once, after it
        f"a {idempotency_key(done.id, 'tool:ship#call_a')}",
        f"b {idempotency_key(done.id, 'tool:ship#call_b')}",
    ]


async def test_function_calls_without_an_id_keep_the_id_they_were_given_across_a_restart(tmp_path: Path) -> None:
    from google.adk.agents import Agent
    from google.adk.tools import FunctionTool

    from ..support import google_adk_fixtures as fixtures
    from ..support.google_adk_fixtures import scripted

    model = scripted("noid", "refund", {"order_id": "o_1"}, call_id=None)
    agent = Agent(name="noid", model=model, tools=[FunctionTool(fixtures.refund, require_confirmation=True)])
    store = SQLiteStore(tmp_path / "runs.db")
    async with create_test_unit({"noid": agent}, store) as unit:
        parked = await unit.run("noid", "refund")
    assert parked.interrupt is not None, parked.error
    call_id = parked.interrupt.payload["call_id"]
    assert call_id.startswith("adk-")
    async with create_test_unit({"noid": agent}, store) as unit:
        done = await unit.resume(parked.id, True)
    await store.close()
    assert done.output == "done: refunded o_1", done.error
    assert fixtures.LOG[1] == f"refund o_1 {idempotency_key(parked.id, f'tool:refund#{call_id}')}"


async def test_a_changed_request_on_replay_is_a_clear_error(tmp_path: Path) -> None:
    from google.adk.agents import Agent
    from google.adk.tools import FunctionTool

    from ..support import google_adk_fixtures as fixtures
    from ..support.google_adk_fixtures import scripted

    def build(instruction: str) -> Agent:
        model = scripted("changing", "refund", {"order_id": "o_1"})
        return Agent(
            name="support",
            model=model,
            instruction=instruction,
            tools=[FunctionTool(fixtures.refund, require_confirmation=True)],
        )

    store = SQLiteStore(tmp_path / "runs.db")
    async with create_test_unit({"support": build("Be kind.")}, store) as unit:
        parked = await unit.run("support", "refund")
    async with create_test_unit({"support": build("Be brief.")}, store) as unit:  # the code changed meanwhile
        failed = await unit.resume(parked.id, True)
    await store.close()
    assert failed.status == RunStatus.failed and failed.error is not None
    assert failed.error.type == "NonDeterminismError"
    assert "model:scripted-changing#0 was asked something different on replay" in failed.error.message
