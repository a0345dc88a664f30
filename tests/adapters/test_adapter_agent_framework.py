"""The Microsoft Agent Framework adapter: journaled chat and function calls, approvals, restarts, crashes, threads.

Every chat client here is scripted (tests/support/agent_framework_fixtures.py): nothing touches the network.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, TypeAdapter

from agent_unit import RunStatus
from agent_unit._events import MODEL_FINISHED, MODEL_STARTED
from agent_unit._records import record_usage
from agent_unit.adapters.registry import builtin_adapters
from agent_unit.run import idempotency_key
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import create_test_unit

# Agent Framework, its adapter and the fixtures are imported by the tests that use them, not here:
# with AG-UI's event types they cost ~0.2 s of CPU, which every pytest worker would otherwise pay to
# collect this module.
if TYPE_CHECKING:
    from agent_framework import Message
REJECTED = "Error: Tool call invocation was rejected by user."  # what the framework tells the model


def usage(calls: int) -> list[dict[str, Any]]:
    return [
        {
            "provider": "scripted-provider",
            "model": "scripted",
            "inputTokens": 10 * calls,
            "outputTokens": 5 * calls,
            "totalTokens": 15 * calls,
        }
    ]


def test_the_builtin_registry_picks_the_adapter_for_an_agent_framework_agent() -> None:
    from agent_unit.adapters.agent_framework import adapter

    from ..support.agent_framework_fixtures import ScriptedClient, refund_agent, refund_script

    agent = refund_agent(ScriptedClient(refund_script))
    chosen = [each for each in builtin_adapters() if each.match(agent)]
    assert [each.name for each in chosen] == ["agent-framework"]
    described = adapter.adapt(agent)
    assert described.description == "Refunds orders."
    assert described.input_schema["required"] == ["prompt"]


async def test_a_run_streams_ag_ui_events_and_records_output_and_usage() -> None:
    from ag_ui.core import Event

    from ..support.agent_framework_fixtures import ScriptedClient, refund_agent, refund_script

    client, effects = ScriptedClient(refund_script), []
    unit = create_test_unit({"support": refund_agent(client, effects, approve=False)}, adapters=[])
    done = await unit.run("support", {"prompt": "refund my order"})
    assert done.status == RunStatus.completed, done.error
    assert done.output == "done: refunded o_1" and done.usage == record_usage(usage(2))
    assert len(client.calls) == 2 and effects == [f"refund o_1 {idempotency_key(done.id, 'tool:refund#call_1')}"]
    assert client.streamed == [True, True]  # live, although the adapter runs the agent without streaming
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
    assert by_type["TOOL_CALL_RESULT"]["content"] == '"refunded o_1"'
    assert by_type["TEXT_MESSAGE_CONTENT"]["delta"] == "done: refunded o_1"
    assert by_type["RUN_FINISHED"]["result"] == "done: refunded o_1" and by_type["RUN_FINISHED"]["usage"] == usage(2)
    agui = TypeAdapter(Event)
    for event in events:
        event.pop("seq")
        agui.validate_python(event)


async def test_a_client_that_cannot_stream_is_asked_once_and_its_response_shown_whole() -> None:
    from agent_framework import Agent

    from ..support.agent_framework_fixtures import ScriptedClient, say

    client = ScriptedClient(lambda messages: say("hello there"), can_stream=False)
    unit = create_test_unit({"chat": Agent(client, "Chat.", name="chat")}, adapters=[])
    done = await unit.run("chat", "hi")
    assert done.status == RunStatus.completed, done.error
    assert done.output == "hello there" and len(client.calls) == 1 and client.streamed == [True, False]
    text = [event["delta"] for event in await unit.events(done.id) if event["type"] == "TEXT_MESSAGE_CONTENT"]
    assert text == ["hello there"]


class Refund(BaseModel):
    order_id: str
    amount: int


async def test_structured_output_is_the_output() -> None:
    from agent_framework import Agent

    from ..support.agent_framework_fixtures import ScriptedClient, say

    client = ScriptedClient(lambda messages: say('{"order_id": "o_1", "amount": 5}'))
    agent = Agent(client, "Extract the refund.", name="extract", default_options={"response_format": Refund})
    unit = create_test_unit({"extract": agent}, adapters=[])
    done = await unit.run("extract", "refund 5 on o_1")
    assert done.status == RunStatus.completed, done.error
    assert done.output == {"order_id": "o_1", "amount": 5}


async def test_approve_after_a_restart_runs_the_tool_once_and_repeats_no_model_call(tmp_path: Path) -> None:
    from ..support.agent_framework_fixtures import ScriptedClient, refund_agent, refund_script

    client, effects = ScriptedClient(refund_script), []
    agent = refund_agent(client, effects)
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
    assert len(client.calls) == 1 and effects == []
    await first.close()
    await first.store.close()

    second = create_test_unit({"support": agent}, SQLiteStore(tmp_path / "runs.db"), adapters=[])
    done = await second.resume(parked.id, True)
    assert done.status == RunStatus.completed, done.error
    assert done.output == "done: refunded o_1" and done.usage == record_usage(usage(2))
    assert len(client.calls) == 2  # the first response came from the journal
    assert effects == [f"refund o_1 {idempotency_key(parked.id, 'tool:refund#call_1')}"]
    events = await second.events(parked.id)
    resumed = [event["type"] for event in events]
    assert resumed[resumed.index("RUN_INTERRUPTED") + 1 :][:2] == ["RUN_STARTED", "TOOL_CALL_RESULT"]
    assert resumed.count("REASONING_START") == 1  # the replayed response emitted nothing again
    await second.close()
    await second.store.close()


async def test_a_declined_approval_runs_nothing_and_the_model_sees_the_rejection() -> None:
    from ..support.agent_framework_fixtures import ScriptedClient, refund_agent, refund_script, results

    client, effects = ScriptedClient(refund_script), []
    unit = create_test_unit({"support": refund_agent(client, effects)}, adapters=[])
    parked = await unit.run("support", "refund my order")
    done = await unit.resume(parked.id, {"approved": False, "reason": "no"})
    assert done.status == RunStatus.completed, done.error
    assert effects == [] and len(client.calls) == 2
    assert results(client.calls[-1]) == {"call_1": REJECTED}
    assert done.output == f"done: {REJECTED}"


async def test_parallel_tool_calls_each_run_once_under_their_own_call_id(tmp_path: Path) -> None:
    from agent_framework import Message

    from ..support.agent_framework_fixtures import ScriptedClient, call, refund_agent, results, say

    effects: list[str] = []

    def script(messages: Sequence[Message]) -> Message:
        done = results(messages)
        if {"call_a", "call_b"} <= done.keys():
            return say(f"{done['call_a']} and {done['call_b']}")
        asks = [call("refund", {"order_id": "o_a"}, "call_a"), call("refund", {"order_id": "o_b"}, "call_b")]
        return Message(role="assistant", contents=asks)

    client = ScriptedClient(script)
    agent = refund_agent(client, effects)
    first = create_test_unit({"support": agent}, SQLiteStore(tmp_path / "runs.db"), adapters=[])
    parked = await first.run("support", "refund both")
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None, parked.error
    assert parked.interrupt.payload["call_id"] == "call_a"
    parked = await first.resume(parked.id, True)
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None, parked.error
    assert parked.interrupt.payload["call_id"] == "call_b"
    await first.close()
    await first.store.close()

    second = create_test_unit({"support": agent}, SQLiteStore(tmp_path / "runs.db"), adapters=[])
    done = await second.resume(parked.id, True)
    await second.close()
    await second.store.close()
    assert done.status == RunStatus.completed, done.error
    assert done.output == "refunded o_a and refunded o_b"
    assert len(client.calls) == 2  # one call asked for both tools, one read their results
    assert sorted(effects) == [
        f"refund o_a {idempotency_key(parked.id, 'tool:refund#call_a')}",
        f"refund o_b {idempotency_key(parked.id, 'tool:refund#call_b')}",
    ]


async def test_a_second_run_on_the_thread_sees_the_first_runs_messages() -> None:
    from agent_framework import Agent

    from ..support.agent_framework_fixtures import ScriptedClient, say

    def chat(messages: Sequence[Message]) -> Message:
        said = [message.text for message in messages if message.role == "user"]
        return say(f"you said {' then '.join(said)}")

    client = ScriptedClient(chat)
    unit = create_test_unit({"chat": Agent(client, "Chat.", name="chat")}, adapters=[])
    first = await unit.run("chat", "hello")
    second = await unit.run("chat", "how are you", thread_id=first.thread_id)
    assert first.output == "you said hello"
    assert second.output == "you said hello then how are you"
    assert [message.role for message in client.calls[1]] == ["user", "assistant", "user"]
    other = await unit.run("chat", "hi")  # another thread starts afresh
    assert other.output == "you said hi"


async def test_a_different_request_on_replay_is_a_clear_error() -> None:
    from ..support.agent_framework_fixtures import ScriptedClient, refund_agent, refund_script

    client = ScriptedClient(refund_script)
    unit = create_test_unit({"support": refund_agent(client)}, adapters=[])
    parked = await unit.run("support", "refund my order")
    stored = await unit.store.load_run(parked.id)
    assert stored is not None
    stored.input = "something else entirely"  # the replay now asks the model something else
    await unit.store.save_run(stored, expected_version=stored.version)
    failed = await unit.resume(parked.id, True)
    assert failed.status == RunStatus.failed and failed.error is not None
    assert "model:scripted#0 was asked something different on replay" in failed.error.message
    assert len(client.calls) == 1
