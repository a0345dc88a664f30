"""The Strands Agents adapter: journaled model calls and tools, approvals, restarts, crashes, threads.

Every model here is scripted (tests/support/strands_fixtures.py): nothing touches the network.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

# strands-agents pins mcp<2.2 and the dev extra needs mcp>=2.3: it lives in its own environment
pytest.importorskip("strands", reason="strands-agents is not installed: pip install 'agent-unit[strands]'")

from ag_ui.core import Event
from pydantic import BaseModel, TypeAdapter
from strands import Agent, ToolContext, tool
from strands.hooks import BeforeToolCallEvent, BeforeToolsEvent

from agent_unit import RunStatus, use_run
from agent_unit._records import record_usage
from agent_unit.adapters.registry import builtin_adapters
from agent_unit.adapters.strands import adapter
from agent_unit.run import idempotency_key
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import create_test_unit
from agent_unit.testing.adapters import Scenario

from ..support.adapter_suites import SUITES
from ..support.strands_fixtures import (
    Block,
    Messages,
    ScriptedModel,
    refund_agent,
    refund_script,
    results,
    said,
)

AGUI = TypeAdapter(Event)


def usage(calls: int) -> list[dict[str, Any]]:
    return [
        {
            "provider": "scripted",
            "model": "scripted",
            "inputTokens": 10 * calls,
            "outputTokens": 5 * calls,
            "totalTokens": 15 * calls,
        }
    ]


def test_the_builtin_registry_picks_the_adapter_for_a_strands_agent() -> None:
    agent = Agent(model=ScriptedModel(refund_script), description="Refunds orders.", callback_handler=None)
    assert [each.name for each in builtin_adapters() if each.match(agent)] == ["strands"]
    described = adapter.adapt(agent)
    assert described.description == "Refunds orders."
    assert described.input_schema["required"] == ["prompt"]


async def test_a_run_streams_ag_ui_events_and_records_output_and_usage() -> None:
    model, effects = ScriptedModel(refund_script), []
    unit = create_test_unit({"support": refund_agent(model, effects, approve=False)}, adapters=[])
    done = await unit.run("support", {"prompt": "refund my order"})
    assert done.status == RunStatus.completed, done.error
    assert done.output == "done: refunded o_1" and done.usage == record_usage(usage(2))
    assert len(model.calls) == 2 and effects == [f"refund o_1 {idempotency_key(done.id, 'tool:refund#call_1')}"]
    events = await unit.events(done.id)
    assert [event["type"] for event in events] == [
        "RUN_STARTED",
        "CUSTOM",  # agent-unit.model-started
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "CUSTOM",  # agent-unit.model-finished: the model asked for the tool
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "CUSTOM",  # agent-unit.model-started
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",  # two deltas, merged within delta_batch_ms
        "TEXT_MESSAGE_END",
        "CUSTOM",  # agent-unit.model-finished
        "RUN_FINISHED",
    ]
    by_type = {event["type"]: event for event in events}
    assert (
        by_type["TOOL_CALL_START"]["toolCallName"] == "refund" and by_type["TOOL_CALL_START"]["toolCallId"] == "call_1"
    )
    assert by_type["TOOL_CALL_ARGS"]["delta"] == '{"order_id": "o_1"}'
    assert by_type["REASONING_MESSAGE_CONTENT"]["delta"] == "the customer wants a refund"
    assert by_type["TEXT_MESSAGE_CONTENT"]["delta"] == "done: refunded o_1"
    assert by_type["RUN_FINISHED"]["result"] == "done: refunded o_1" and by_type["RUN_FINISHED"]["usage"] == usage(2)
    for event in events:
        event.pop("seq")
        AGUI.validate_python(event)


class Refund(BaseModel):
    order_id: str
    amount: int


async def test_structured_output_is_the_runs_output() -> None:
    def script(messages: Messages) -> list[Block]:
        return [("tool", "Refund", {"order_id": "o_1", "amount": 5}, "call_s")]

    agent = Agent(model=ScriptedModel(script), structured_output_model=Refund, callback_handler=None)
    unit = create_test_unit({"extract": agent}, adapters=[])
    done = await unit.run("extract", "refund 5 on o_1")
    assert done.status == RunStatus.completed, done.error
    assert done.output == {"order_id": "o_1", "amount": 5}


async def test_approve_after_a_restart_runs_the_tool_once_and_repeats_no_model_call(tmp_path: Path) -> None:
    model, effects = ScriptedModel(refund_script), []
    agent = refund_agent(model, effects)
    first = create_test_unit({"support": agent}, SQLiteStore(tmp_path / "runs.db"), adapters=[])
    parked = await first.run("support", "refund my order")
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None, parked.error
    assert parked.interrupt.name == "tool-approval"
    assert parked.interrupt.payload == {
        "call_id": "call_1",
        "tool": "refund",
        "arguments": {"order_id": "o_1"},
        "agent": "support",
    }
    assert len(model.calls) == 1 and effects == []
    await first.close()
    await first.store.close()

    second = create_test_unit({"support": refund_agent(model, effects)}, SQLiteStore(tmp_path / "runs.db"), adapters=[])
    done = await second.resume(parked.id, True)
    assert done.status == RunStatus.completed, done.error
    assert done.output == "done: refunded o_1" and done.usage == record_usage(usage(2))
    assert len(model.calls) == 2  # the first response came from the journal
    assert effects == [f"refund o_1 {idempotency_key(parked.id, 'tool:refund#call_1')}"]
    resumed = [event["type"] for event in await second.events(parked.id)]
    # the call was shown before the park; the resumed segment adds only its result
    assert resumed[resumed.index("RUN_INTERRUPTED") + 1 :][:2] == ["RUN_STARTED", "TOOL_CALL_RESULT"]
    assert resumed.count("TOOL_CALL_START") == 1
    assert resumed.count("REASONING_START") == 1  # the replayed response emitted nothing again
    await second.close()
    await second.store.close()


async def test_a_declined_approval_runs_nothing_and_the_model_sees_the_cancelled_call() -> None:
    model, effects = ScriptedModel(refund_script), []
    unit = create_test_unit({"support": refund_agent(model, effects)}, adapters=[])
    parked = await unit.run("support", "refund my order")
    done = await unit.resume(parked.id, {"approved": False, "reason": "no"})
    assert done.status == RunStatus.completed, done.error
    assert effects == [] and len(model.calls) == 2
    assert results(model.calls[-1]) == {"call_1": "declined: no"}  # the hook's own cancel_tool message
    assert done.output == "done: declined: no"
    shown = [event["type"] for event in await unit.events(parked.id) if event["type"].startswith("TOOL_CALL")]
    assert shown == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]  # shown before the park, never run


async def test_a_declined_call_is_cancelled_even_when_the_hook_ignores_the_answer() -> None:
    def ask(event: BeforeToolCallEvent) -> None:
        event.interrupt("approval", reason="refund?")  # asks, but never reads the answer

    effects: list[str] = []

    @tool
    def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id: the order
        """
        effects.append(order_id)
        return "refunded"

    agent = Agent(model=ScriptedModel(refund_script), tools=[refund], callback_handler=None)  # no name
    agent.hooks.add_callback(BeforeToolCallEvent, ask)
    unit = create_test_unit({"refunds": agent}, adapters=[])
    parked = await unit.run("refunds", "refund my order")
    assert parked.interrupt is not None and parked.interrupt.payload["agent"] == "refunds"  # not Strands' default
    done = await unit.resume(parked.id, False)
    assert done.status == RunStatus.completed, done.error
    assert effects == [] and done.output == "done: Tool call declined by a human."


async def test_parallel_tool_calls_are_each_journaled_once_under_their_own_key(tmp_path: Path) -> None:
    effects: list[str] = []

    def script(messages: Messages) -> list[Block]:
        if len(results(messages)) == 2:
            return [("text", "shipped both")]
        return [("tool", "ship", {"box": "a"}, "call_a"), ("tool", "ship", {"box": "b"}, "call_b")]

    @tool
    async def ship(box: str) -> str:
        """Ship a box.

        Args:
            box: which box
        """
        effects.append(f"{box} {use_run().idempotency_key()}")
        await asyncio.sleep(0.01)
        return f"shipped {box}"

    model = ScriptedModel(script)
    agent = Agent(model=model, tools=[ship], callback_handler=None)
    store = SQLiteStore(tmp_path / "runs.db")
    async with create_test_unit({"shipper": agent}, store, adapters=[]) as unit:
        done = await unit.run("shipper", "ship both")
        assert done.status == RunStatus.completed and done.output == "shipped both", done.error
    await store.close()
    assert sorted(effects) == [
        f"a {idempotency_key(done.id, 'tool:ship#call_a')}",
        f"b {idempotency_key(done.id, 'tool:ship#call_b')}",
    ]
    assert len(model.calls) == 2


async def test_parallel_approvals_each_pause_under_their_call_id_and_only_the_approved_call_runs(
    tmp_path: Path,
) -> None:
    def script(messages: Messages) -> list[Block]:
        if len(results(messages)) == 2:
            return [("text", " | ".join(f"{key}={value}" for key, value in sorted(results(messages).items())))]
        return [("tool", "refund", {"order_id": "o_a"}, "call_a"), ("tool", "refund", {"order_id": "o_b"}, "call_b")]

    model, effects = ScriptedModel(script), []
    store = SQLiteStore(tmp_path / "runs.db")
    async with create_test_unit({"support": refund_agent(model, effects)}, store, adapters=[]) as unit:
        parked = await unit.run("support", "refund both")
        assert parked.interrupt is not None and parked.interrupt.payload["call_id"] == "call_a", parked.error
    async with create_test_unit({"support": refund_agent(model, effects)}, store, adapters=[]) as unit:
        again = await unit.resume(parked.id, True)
        assert again.interrupt is not None and again.interrupt.payload["call_id"] == "call_b", again.error
        done = await unit.resume(parked.id, {"approved": False, "reason": "not b"})
    await store.close()
    assert done.status == RunStatus.completed, done.error
    assert done.output == "call_a=refunded o_a | call_b=declined: not b"
    assert effects == [f"refund o_a {idempotency_key(parked.id, 'tool:refund#call_a')}"]
    assert len(model.calls) == 2


async def test_an_interrupt_before_a_batch_of_tools_pauses_under_its_name_and_gets_the_answer() -> None:
    answers: list[Any] = []

    def confirm(event: BeforeToolsEvent) -> None:
        answers.append(event.interrupt("confirm-batch", reason={"count": 1}))

    model, effects = ScriptedModel(refund_script), []
    agent = refund_agent(model, effects, approve=False)
    agent.hooks.add_callback(BeforeToolsEvent, confirm)
    unit = create_test_unit({"support": agent}, adapters=[])
    parked = await unit.run("support", "refund my order")
    assert parked.interrupt is not None, parked.error
    assert (parked.interrupt.name, parked.interrupt.payload) == ("confirm-batch", {"count": 1})
    done = await unit.resume(parked.id, "go ahead")
    assert done.status == RunStatus.completed and done.output == "done: refunded o_1", done.error
    assert answers == ["go ahead"] and len(effects) == 1 and len(model.calls) == 2


async def test_a_strands_interrupt_inside_a_tool_fails_the_run_with_what_to_use_instead() -> None:
    @tool(context=True)
    def refund(order_id: str, tool_context: ToolContext) -> str:
        """Refund an order.

        Args:
            order_id: the order
        """
        tool_context.interrupt("approval", reason="refund?")
        return "refunded"

    model = ScriptedModel(refund_script)
    unit = create_test_unit({"support": Agent(model=model, tools=[refund], callback_handler=None)}, adapters=[])
    failed = await unit.run("support", "refund my order")
    assert failed.status == RunStatus.failed and failed.error is not None
    assert "use_run().interrupt(name, payload)" in failed.error.message
    assert len(model.calls) == 1  # stopped before the model saw an error result


async def test_a_second_run_on_the_thread_sees_the_first_runs_messages() -> None:
    def chat(messages: Messages) -> list[Block]:
        return [("text", f"you said {' then '.join(said(messages))}")]

    model = ScriptedModel(chat)
    unit = create_test_unit({"chat": Agent(model=model, callback_handler=None)}, adapters=[])
    first = await unit.run("chat", "hello")
    second = await unit.run("chat", "how are you", thread_id=first.thread_id)
    assert first.output == "you said hello"
    assert second.output == "you said hello then how are you"
    assert [message["role"] for message in model.calls[1]] == ["user", "assistant", "user"]
    other = await unit.run("chat", "hi")  # another thread starts afresh
    assert other.output == "you said hi"


async def test_concurrent_runs_of_one_agent_each_keep_their_own_conversation() -> None:
    def chat(messages: Messages) -> list[Block]:
        return [("text", f"you said {' then '.join(said(messages))}")]

    unit = create_test_unit({"chat": Agent(model=ScriptedModel(chat), callback_handler=None)}, adapters=[])
    first, second = await asyncio.gather(unit.run("chat", "hello"), unit.run("chat", "hi"))
    assert (first.status, second.status) == (RunStatus.completed, RunStatus.completed), (first.error, second.error)
    assert (first.output, second.output) == ("you said hello", "you said hi")


async def test_a_different_request_on_replay_is_a_clear_error() -> None:
    model = ScriptedModel(refund_script)
    unit = create_test_unit({"support": refund_agent(model)}, adapters=[])
    parked = await unit.run("support", "refund my order")
    stored = await unit.store.load_run(parked.id)
    assert stored is not None
    stored.input = "something else entirely"  # the replay now asks the model something else
    await unit.store.save_run(stored, expected_version=stored.version)
    failed = await unit.resume(parked.id, True)
    assert failed.status == RunStatus.failed and failed.error is not None
    assert "model:scripted#0 was asked something different on replay" in failed.error.message
    assert len(model.calls) == 1


# -- the adapter conformance suite (tests/adapters/test_conformance.py), from this environment ----


@pytest.mark.slow  # servers and killed processes
@pytest.mark.parametrize("scenario", SUITES["strands"].scenarios(), ids=lambda scenario: scenario.__name__)
async def test_conformance(scenario: Scenario, tmp_path: Path) -> None:
    await scenario(SUITES["strands"], tmp_path)
