"""Agents of the tiny chat framework (echo_framework.py) for the conformance suite, as a third-party
adapter's test project writes them: its adapter is not built in, the suite names it."""

from __future__ import annotations

from typing import Any

from agent_unit.testing import adapters as conformance

from .echo_framework import ChatAgent


def scripted(name: str, tool: str, arguments: dict[str, Any]) -> Any:
    """A model that calls ``tool`` once, then says what it answered."""

    async def model(request: dict[str, Any]) -> dict[str, Any]:
        messages = request["messages"]
        conformance.model_called(f"{name} {len(messages)}")
        if len(messages) == 1:
            call = {"id": "call_1", "name": tool, "arguments": arguments}
            return {"message": {"role": "assistant", "content": ""}, "tool_call": call}
        return {"message": {"role": "assistant", "content": f"done: {messages[-1]['content']}"}}

    return model


def refund(order_id: str) -> str:
    conformance.effect(f"refund {order_id}")
    return f"refunded {order_id}"


async def charge(amount: int) -> str:
    await conformance.crash_point()  # the conformance suite kills the process here
    conformance.effect(f"charge {amount}")
    return f"charged {amount}"


AGENTS = {
    "support": ChatAgent(scripted("support", "refund", {"order_id": "o_1"}), {"refund": refund}, approve=("refund",)),
    "charger": ChatAgent(scripted("charger", "charge", {"amount": 42}), {"charge": charge}),
}
