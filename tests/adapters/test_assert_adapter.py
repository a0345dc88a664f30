"""assert_adapter: passes for adapters that journal their effects, fails for one that does not."""

from __future__ import annotations

from typing import Any

import pytest

from agent_unit.adapters import AdapterContext, define_adapter
from agent_unit.testing import AdapterCheckFailed, EffectKit, assert_adapter

from ..support.echo_framework import ChatAgent, chat_adapter
from ..support.server import ROOT


def chat_agent(kit: EffectKit, *, approve: bool = False) -> ChatAgent:
    async def model(request: dict[str, Any]) -> dict[str, Any]:
        kit.effect(f"model call {len(request['messages'])}")
        if len(request["messages"]) == 1:
            call = {"id": "call_1", "name": "refund", "arguments": {"order_id": "o_1"}}
            return {"message": {"role": "assistant", "content": ""}, "tool_call": call}
        return {"message": {"role": "assistant", "content": "done"}}

    def refund(order_id: str) -> str:
        kit.effect(f"refund {order_id}")
        return "ok"

    return ChatAgent(model, {"refund": refund}, approve=("refund",) if approve else ())


async def test_a_journaling_adapter_passes() -> None:
    await assert_adapter(
        adapter=chat_adapter,
        agent=chat_agent,
        input="refund o_1",
        pause={"agent": lambda kit: chat_agent(kit, approve=True), "answer": True},
    )


class Leaky:
    def __init__(self, kit: EffectKit) -> None:
        self.kit = kit


async def _leaky_run(agent: Leaky, ctx: AdapterContext) -> str:
    agent.kit.effect("charge")  # not inside a journaled call: a replay charges again
    return "charged"


leaky_adapter = define_adapter(name="leaky", match=lambda value: isinstance(value, Leaky), run=_leaky_run)


async def test_an_adapter_that_runs_effects_outside_the_journal_fails() -> None:
    with pytest.raises(AdapterCheckFailed) as caught:
        await assert_adapter(adapter=leaky_adapter, agent=Leaky)
    assert "effects ran outside a journaled call: charge" in str(caught.value)
    assert "effects ran again after a restart: charge" in str(caught.value)


async def test_the_example_third_party_adapter_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "agent-unit-adapter-echo"))
    from agent_unit_adapter_echo import Echo, adapter

    def echo(kit: EffectKit) -> Echo:
        def log(text: str) -> str:
            kit.effect(f"log {text}")
            return "logged"

        return Echo("hi ", tools={"log": log})

    await assert_adapter(adapter=adapter, agent=echo, input="there")
