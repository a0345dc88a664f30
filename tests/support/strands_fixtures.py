"""Strands agents and a scripted Strands model for the adapter's tests (importable by a child process).

The model never touches the network: ``script(messages)`` gives its reply blocks for the
conversation it was called with, and every call is counted. Effects and model calls are also
appended to the files named by ``EFFECTS_FILE`` and ``MODEL_CALLS_FILE`` when set, so a count
survives the process that made it (a killed child, a restarted server).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

from strands import Agent, tool
from strands.hooks import BeforeToolCallEvent
from strands.models import Model

from agent_unit import use_run
from agent_unit.testing import adapters as conformance

Messages = list[dict[str, Any]]
Block = tuple[Any, ...]  # ("text", s) | ("reasoning", s) | ("tool", name, arguments, call_id)
Script = Callable[[Messages], list[Block]]


def _append(variable: str, line: str) -> None:
    if path := os.environ.get(variable):
        with Path(path).open("a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


def effect(line: str, effects: list[str] | None = None) -> None:
    if effects is not None:
        effects.append(line)
    _append("EFFECTS_FILE", line)


def results(messages: Messages) -> dict[str, str]:
    """The tool results the model was given so far, by tool use id (their text)."""
    found = {}
    for message in messages:
        for block in message["content"]:
            if "toolResult" in block:
                result = block["toolResult"]
                found[result["toolUseId"]] = "".join(part.get("text", "") for part in result["content"])
    return found


def said(messages: Messages) -> list[str]:
    """The user's prompts so far."""
    return [block["text"] for m in messages if m["role"] == "user" for block in m["content"] if "text" in block]


class ScriptedModel(Model):
    """A Strands model that answers from a script and counts its calls (``calls`` holds each call's messages)."""

    def __init__(self, script: Script, *, model_id: str = "scripted") -> None:
        self.script = script
        self.config = {"model_id": model_id}
        self.calls: list[Messages] = []

    def update_config(self, **model_config: Any) -> None:
        self.config.update(model_config)

    def get_config(self) -> Any:
        return self.config

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncGenerator[Any]:
        self.calls.append(json.loads(json.dumps(messages, default=str)))
        _append("MODEL_CALLS_FILE", f"{self.config['model_id']} {len(messages)}")
        conformance.model_called(f"{self.config['model_id']} {len(messages)}")
        blocks = self.script(self.calls[-1])
        await asyncio.sleep(0.001)  # as a real model waits on the network: other runs get to go meanwhile
        yield {"messageStart": {"role": "assistant"}}
        for block in blocks:
            if block[0] == "tool":
                _, name, arguments, call_id = block
                yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": call_id, "name": name}}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(arguments)}}}}
            else:
                yield {"contentBlockStart": {"start": {}}}
                for piece in (block[1][: len(block[1]) // 2], block[1][len(block[1]) // 2 :]):
                    delta = {"text": piece} if block[0] == "text" else {"reasoningContent": {"text": piece}}
                    yield {"contentBlockDelta": {"delta": delta}}
            yield {"contentBlockStop": {}}
        stop = "tool_use" if any(block[0] == "tool" for block in blocks) else "end_turn"
        yield {"messageStop": {"stopReason": stop}}
        usage = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
        yield {"metadata": {"usage": usage, "metrics": {"latencyMs": 1}}}


# -- a refund that needs approval ------------------------------------------------------------


def refund_script(messages: Messages) -> list[Block]:
    """Ask for the refund; once its result is in, say what happened."""
    if "call_1" in results(messages):
        return [("text", f"done: {results(messages)['call_1']}")]
    return [("reasoning", "the customer wants a refund"), ("tool", "refund", {"order_id": "o_1"}, "call_1")]


def approve_refunds(event: BeforeToolCallEvent) -> None:
    """The Strands way of asking a human: an interrupt in a hook, before the tool runs."""
    if event.tool_use["name"] == "refund":
        answer = event.interrupt("approval", reason={"tool": "refund"})
        if not answer["approved"]:
            event.cancel_tool = f"declined: {answer['reason']}"


def refund_agent(model: Model, effects: list[str] | None = None, *, approve: bool = True) -> Agent:
    @tool
    def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id: the order
        """
        effect(f"refund {order_id} {use_run().idempotency_key()}", effects)
        conformance.effect(f"refund {order_id}")
        return f"refunded {order_id}"

    hooks = [approve_refunds] if approve else []
    return Agent(
        model=model,
        tools=[refund],
        name="support",
        system_prompt="You refund orders.",
        hooks=hooks,
        callback_handler=None,
    )


# -- a tool that hangs (in the process that will be killed) ---------------------------------


def charge_script(messages: Messages) -> list[Block]:
    if "call_c" in results(messages):
        return [("text", f"done: {results(messages)['call_c']}")]
    return [("tool", "charge", {"amount": 5}, "call_c")]


@tool
async def charge(amount: int) -> str:
    """Charge the card.

    Args:
        amount: how much
    """
    await conformance.crash_point()  # the conformance suite kills the process here
    conformance.effect(f"charge {amount}")
    return f"charged {amount}"


AGENTS = {
    "refund": refund_agent(ScriptedModel(refund_script)),
    "crashable": Agent(model=ScriptedModel(charge_script), tools=[charge], name="biller", callback_handler=None),
}
