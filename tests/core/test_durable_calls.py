"""ctx.durable.model and ctx.durable.tools: journaled by result, checked by request hash, keyed by call id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from agent_unit import Run, RunStatus, define_agent, use_run
from agent_unit._records import agui_usage
from agent_unit.run import idempotency_key
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import create_test_unit

from ..support.echo_framework import ChatAgent, chat_adapter


class Script:
    """A scripted model: asks for the refund tool, then answers; counts every call."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    async def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(len(request["messages"]))
        usage = {"provider": "test", "model": "scripted", "inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
        if len(request["messages"]) == 1:
            call = {"id": "call_1", "name": "refund", "arguments": {"order_id": "o_1"}}
            return {"message": {"role": "assistant", "content": ""}, "tool_call": call, "usage": usage}
        return {
            "message": {"role": "assistant", "content": f"done: {request['messages'][-1]['content']}"},
            "usage": usage,
        }


def make_agent(effects: list[str], keys: list[str], script: Script) -> ChatAgent:
    def refund(order_id: str) -> str:
        effects.append(order_id)
        keys.append(use_run().idempotency_key())
        return f"refunded {order_id}"

    return ChatAgent(script, {"refund": refund}, approve=("refund",))


async def test_approve_restart_resume_repeats_no_model_call_and_no_effect(tmp_path: Path) -> None:
    effects: list[str] = []
    keys: list[str] = []
    script = Script()
    agent = make_agent(effects, keys, script)
    first = create_test_unit({"chat": agent}, SQLiteStore(tmp_path / "runs.db"), adapters=[chat_adapter])
    parked = await first.run("chat", "refund my order")
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None
    assert parked.interrupt.payload == {"call_id": "call_1", "tool": "refund", "arguments": {"order_id": "o_1"}}
    assert script.calls == [1] and effects == []
    await first.close()
    await first.store.close()

    second = create_test_unit({"chat": agent}, SQLiteStore(tmp_path / "runs.db"), adapters=[chat_adapter])
    done = await second.resume(parked.id, True)
    assert done.status == RunStatus.completed and done.output == "done: refunded o_1"
    assert script.calls == [1, 3]  # the first model call replayed from the journal
    assert effects == ["o_1"] and keys == [idempotency_key(parked.id, "tool:refund#call_1")]
    assert done.usage == [
        {"provider": "test", "model": "scripted", "input_tokens": 20, "output_tokens": 10, "total_tokens": 30}
    ]
    events = await second.events(parked.id)
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED" and finished["usage"] == agui_usage(done.usage)
    tool_events = [event["type"] for event in events if event["type"].startswith("TOOL_CALL")]
    assert tool_events == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"]
    for event in events:
        if event["type"].startswith("TOOL_CALL"):
            TypeAdapter(Event).validate_python({k: v for k, v in event.items() if k != "seq"})
    await second.close()
    await second.store.close()


async def test_a_declined_approval_runs_nothing() -> None:
    effects: list[str] = []
    script = Script()
    unit = create_test_unit({"chat": make_agent(effects, [], script)}, adapters=[chat_adapter])
    parked = await unit.run("chat", "refund my order")
    done = await unit.resume(parked.id, False)
    assert done.output == "done: declined by a human" and effects == []


async def test_a_different_request_on_replay_is_a_clear_error() -> None:
    script = Script()
    agent = make_agent([], [], script)
    unit = create_test_unit({"chat": agent}, adapters=[chat_adapter])
    parked = await unit.run("chat", "refund my order")
    # The journal says the first model call was asked about "refund my order"; make the replay ask otherwise.
    stored = await unit.store.load_run(parked.id)
    assert stored is not None
    stored.input = "something else entirely"
    await unit.store.save_run(stored, expected_version=stored.version)
    failed = await unit.resume(parked.id, True)
    assert failed.status == RunStatus.failed and failed.error is not None
    assert "agent 'chat': model:chat#0 was asked something different on replay" in failed.error.message
    assert script.calls == [1]


@pytest.mark.parametrize("call_id", ["call_1", None])
async def test_tool_keys_follow_the_call_id(call_id: str | None) -> None:
    from agent_unit.adapters import AdapterContext, define_adapter

    keys: list[str] = []

    async def run(agent: Any, ctx: AdapterContext) -> list[str]:
        tools = ctx.durable.tools({"charge": lambda: keys.append(use_run().idempotency_key()) or "ok"})
        await tools["charge"]({}, call_id=call_id)
        await ctx.run.interrupt("wait")
        return keys

    adapter = define_adapter(name="tooly", match=lambda value: value == "tooly", run=run)
    unit = create_test_unit({"t": "tooly"}, adapters=[adapter])
    parked = await unit.run("t")
    done = await unit.resume(parked.id)
    expected = idempotency_key(parked.id, f"tool:charge#{call_id}" if call_id else "tool:charge#0")
    assert done.output == [expected]  # ran once; the replay did not run it again


async def test_an_interrupt_keyed_by_a_framework_id_shows_the_frameworks_answer_schema_and_resumes() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}

    @define_agent
    async def confirm(input: None, run: Run) -> Any:
        return await run.interrupt("confirm", {"amount": 5}, key="fw-7", schema=schema)

    unit = create_test_unit({"confirm": confirm})
    parked = await unit.run("confirm")
    assert parked.interrupt is not None
    assert (parked.interrupt.key, parked.interrupt.answer_schema) == ("interrupt:confirm@fw-7", schema)
    done = await unit.resume(parked.id, {"ok": True})
    assert done.status == RunStatus.completed and done.output == {"ok": True}
