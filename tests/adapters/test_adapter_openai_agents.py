"""The OpenAI Agents SDK adapter: journaled model calls and tools, approvals, restarts, crashes, threads, handoffs.

Every model here is scripted (tests/support/openai_agents_fixtures.py): nothing touches the network.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import BaseModel, TypeAdapter

from agent_unit import RunStatus
from agent_unit._events import MODEL_FINISHED, MODEL_STARTED
from agent_unit._records import agui_usage
from agent_unit.adapters.registry import builtin_adapters
from agent_unit.errors import InvalidInput
from agent_unit.run import idempotency_key
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import create_test_unit

# The SDK, its adapter and the fixtures are imported by the tests that use them, not here: importing
# the SDK costs ~1.7 s of CPU, which every pytest worker would otherwise pay to collect this module.
if TYPE_CHECKING:
    from ..support.openai_agents_fixtures import Items

ROOT = Path(__file__).resolve().parents[2]
OURS = {"RUN_INTERRUPTED", "RUN_SLEEPING", "RUN_CANCELLED"}
REJECTED = "Tool execution was not approved."  # what the SDK tells the model about a rejected call


def usage(calls: int) -> list[dict[str, Any]]:
    """The run record's usage (snake_case)."""
    return [
        {
            "provider": "openai",
            "model": "scripted",
            "input_tokens": 10 * calls,
            "output_tokens": 5 * calls,
            "total_tokens": 15 * calls,
        }
    ]


def test_the_builtin_registry_picks_the_adapter_for_an_sdk_agent() -> None:
    from agents import Agent

    from agent_unit.adapters.openai_agents import adapter

    chosen = [each for each in builtin_adapters() if each.match(Agent(name="a"))]
    assert [each.name for each in chosen] == ["openai-agents"]
    described = adapter.adapt(Agent(name="a", instructions="You refund orders.\nBe kind."))
    assert described.description == "You refund orders."
    assert described.input_schema["required"] == ["prompt"]


async def test_a_run_streams_ag_ui_events_and_records_output_and_usage() -> None:
    from ag_ui.core import Event

    from ..support.openai_agents_fixtures import ScriptedModel, refund_agent, refund_script

    model, effects = ScriptedModel(refund_script), []
    unit = create_test_unit({"support": refund_agent(model, effects, approve=False)}, adapters=[])
    done = await unit.run("support", {"prompt": "refund my order"})
    assert done.status == RunStatus.completed, done.error
    assert done.output == "done: refunded o_1" and done.usage == usage(2)
    assert len(model.calls) == 2 and effects == [f"refund o_1 {idempotency_key(done.id, 'tool:refund#call_1')}"]
    events = await unit.events(done.id)
    events = [event for event in events if event.get("name") not in (MODEL_STARTED, MODEL_FINISHED)]
    assert [event["type"] for event in events] == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    by_type = {event["type"]: event for event in events}
    assert by_type["TOOL_CALL_START"]["toolCallName"] == "refund"
    assert by_type["TOOL_CALL_ARGS"]["delta"] == '{"order_id": "o_1"}'
    assert by_type["TEXT_MESSAGE_CONTENT"]["delta"] == "done: refunded o_1"
    assert by_type["RUN_FINISHED"]["result"] == "done: refunded o_1" and by_type["RUN_FINISHED"]["usage"] == agui_usage(
        usage(2)
    )
    agui = TypeAdapter(Event)
    for event in events:
        event.pop("seq")
        agui.validate_python(event)


async def test_an_input_that_is_not_a_prompt_is_refused_before_a_run_exists() -> None:
    from ..support.openai_agents_fixtures import ScriptedModel, refund_agent, refund_script

    unit = create_test_unit({"support": refund_agent(ScriptedModel(refund_script))}, adapters=[])
    with pytest.raises(InvalidInput, match="prompt: Field required"):
        await unit.run("support", {"question": "?"})
    assert (await unit.engine.list()).runs == []
    assert unit.engine.agents["support"].input_schema["required"] == ["prompt"]


class Refund(BaseModel):
    order_id: str
    amount: int


async def test_structured_output_is_the_output_type() -> None:
    from agents import Agent

    from ..support.openai_agents_fixtures import ScriptedModel, message

    model = ScriptedModel(lambda items: [message('{"order_id": "o_1", "amount": 5}')])
    agent = Agent(name="extract", instructions="Extract the refund.", output_type=Refund, model=model)
    unit = create_test_unit({"extract": agent}, adapters=[])
    done = await unit.run("extract", "refund 5 on o_1")
    assert done.status == RunStatus.completed, done.error
    assert done.output == {"order_id": "o_1", "amount": 5}


async def test_approve_after_a_restart_runs_the_tool_once_and_repeats_no_model_call(tmp_path: Path) -> None:
    from ..support.openai_agents_fixtures import ScriptedModel, refund_agent, refund_script

    model, effects = ScriptedModel(refund_script), []
    agent = refund_agent(model, effects)
    first = create_test_unit({"support": agent}, SQLiteStore(tmp_path / "runs.db"), adapters=[])
    parked = await first.run("support", "refund my order")
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None
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

    second = create_test_unit({"support": agent}, SQLiteStore(tmp_path / "runs.db"), adapters=[])
    done = await second.resume(parked.id, True)
    assert done.status == RunStatus.completed, done.error
    assert done.output == "done: refunded o_1" and done.usage == usage(2)
    assert len(model.calls) == 2  # the first response came from the journal
    assert effects == [f"refund o_1 {idempotency_key(parked.id, 'tool:refund#call_1')}"]
    events = await second.events(parked.id)
    resumed = [event["type"] for event in events]
    assert resumed[resumed.index("RUN_INTERRUPTED") + 1 :][:2] == ["RUN_STARTED", "TOOL_CALL_RESULT"]
    assert resumed.count("REASONING_START") == 1  # the replayed response emitted nothing again
    await second.close()
    await second.store.close()


async def test_a_declined_approval_runs_nothing_and_the_model_sees_the_rejection() -> None:
    from ..support.openai_agents_fixtures import ScriptedModel, outputs, refund_agent, refund_script

    model, effects = ScriptedModel(refund_script), []
    unit = create_test_unit({"support": refund_agent(model, effects)}, adapters=[])
    parked = await unit.run("support", "refund my order")
    done = await unit.resume(parked.id, {"approved": False, "reason": "no"})
    assert done.status == RunStatus.completed, done.error
    assert effects == [] and len(model.calls) == 2
    assert outputs(model.calls[-1]) == {"call_1": f"{REJECTED} Reason: no"}
    assert done.output == f"done: {REJECTED} Reason: no"


async def test_a_second_run_on_the_thread_sees_the_first_runs_messages() -> None:
    from agents import Agent

    from ..support.openai_agents_fixtures import ScriptedModel, message

    def chat(items: Items) -> list[Any]:
        said = [item["content"] for item in items if item.get("role") == "user"]
        return [message(f"you said {' then '.join(said)}", id=f"msg_{len(said)}")]

    model = ScriptedModel(chat)
    unit = create_test_unit({"chat": Agent(name="chat", instructions="Chat.", model=model)}, adapters=[])
    first = await unit.run("chat", "hello")
    second = await unit.run("chat", "how are you", thread_id=first.thread_id)
    assert first.output == "you said hello"
    assert second.output == "you said hello then how are you"
    assert [item.get("role") for item in model.calls[1]] == ["user", "assistant", "user"]
    other = await unit.run("chat", "hi")  # another thread starts afresh
    assert other.output == "you said hi"


@pytest.mark.parametrize("as_handoff", [False, True], ids=["agent", "handoff-object"])
async def test_a_handoff_target_s_tools_are_journaled(tmp_path: Path, as_handoff: bool) -> None:
    from agents import Agent, handoff

    from ..support.openai_agents_fixtures import ScriptedModel, message, outputs, refund_agent, tool_call

    effects: list[str] = []
    triage_model = ScriptedModel(lambda items: [tool_call("transfer_to_billing", {}, "call_h")], name="triage")

    def billing_script(items: Items) -> list[Any]:
        if "call_2" in outputs(items):
            return [message(f"billing: {outputs(items)['call_2']}")]
        return [tool_call("refund", {"order_id": "o_2"}, "call_2")]

    billing_model = ScriptedModel(billing_script)
    billing = refund_agent(billing_model, effects).clone(name="billing")
    triage = Agent(name="triage", instructions="Route.", model=triage_model)
    triage.handoffs = [handoff(billing) if as_handoff else billing]
    billing.handoffs = [handoff(triage) if as_handoff else triage]  # a cycle

    first = create_test_unit({"triage": triage}, SQLiteStore(tmp_path / "runs.db"), adapters=[])
    parked = await first.run("triage", "refund o_2")
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None, parked.error
    assert parked.interrupt.payload["agent"] == "billing"
    await first.close()
    await first.store.close()

    second = create_test_unit({"triage": triage}, SQLiteStore(tmp_path / "runs.db"), adapters=[])
    done = await second.resume(parked.id, True)
    await second.close()
    await second.store.close()
    assert done.status == RunStatus.completed, done.error
    assert done.output == "billing: refunded o_2"
    assert len(triage_model.calls) == 1 and len(billing_model.calls) == 2
    assert effects == [f"refund o_2 {idempotency_key(parked.id, 'tool:refund#call_2')}"]
    assert {entry["model"] for entry in done.usage} == {"triage", "scripted"}


async def test_a_different_request_on_replay_is_a_clear_error() -> None:
    from ..support.openai_agents_fixtures import ScriptedModel, refund_agent, refund_script

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
