"""OpenAI Agents SDK agents and a scripted model for the adapter's tests (importable by a child process).

The model never touches the network: ``script(items)`` gives its output for the input items it
was called with, and every call is counted. Effects and model calls are also appended to the
files named by ``EFFECTS_FILE`` and ``MODEL_CALLS_FILE`` when set, so a count survives the
process that made it (a killed child, a restarted server).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, Usage, function_tool, generation_span, set_tracing_disabled
from agents.items import TResponseOutputItem
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from openai.types.responses.response_reasoning_item import ResponseReasoningItem, Summary
from pydantic import BaseModel

from agent_unit import use_run
from agent_unit.testing import adapters as conformance

set_tracing_disabled(True)  # offline: no trace export

Items = list[dict[str, Any]]
Script = Callable[[Items], list[TResponseOutputItem]]


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


def message(text: str, id: str = "msg_1") -> ResponseOutputMessage:
    content = [ResponseOutputText(text=text, type="output_text", annotations=[])]
    return ResponseOutputMessage(id=id, content=content, role="assistant", status="completed", type="message")


def tool_call(name: str, arguments: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}", call_id=call_id, name=name, arguments=json.dumps(arguments), type="function_call"
    )


def reasoning(text: str, id: str = "rs_1") -> ResponseReasoningItem:
    return ResponseReasoningItem(id=id, summary=[Summary(text=text, type="summary_text")], type="reasoning")


def outputs(items: Items) -> dict[str, Any]:
    """The tool (and handoff) outputs the model was given so far, by call id."""
    return {item["call_id"]: item["output"] for item in items if item.get("type") == "function_call_output"}


class ScriptedModel(Model):
    """A model that answers from a script and counts its calls (``calls`` holds each call's input)."""

    def __init__(self, script: Script, *, name: str = "scripted") -> None:
        self.script = script
        self.model = name
        self.calls: list[Items] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        items: Items = [{"role": "user", "content": input}] if isinstance(input, str) else [_dict(i) for i in input]
        self.calls.append(items)
        _append("MODEL_CALLS_FILE", f"{self.model} {len(items)}")
        conformance.model_called(f"{self.model} {len(items)}")
        usage = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
        # a generation span, as the SDK's own models open one around each call
        with generation_span(model=self.model, input=items, disabled=tracing.is_disabled()) as span:
            output = self.script(items)
            span.span_data.output = [_dict(item) for item in output]
            span.span_data.usage = {"input_tokens": 10, "output_tokens": 5}
        return ModelResponse(output=output, usage=usage, response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")
        yield  # an async generator


def _dict(item: Any) -> dict[str, Any]:
    return item.model_dump(exclude_unset=True) if isinstance(item, BaseModel) else dict(item)


# -- a refund that needs approval ------------------------------------------------------------


def refund_script(items: Items) -> list[TResponseOutputItem]:
    """Ask for the refund; once its output is in, say what happened."""
    if "call_1" in outputs(items):
        return [message(f"done: {outputs(items)['call_1']}")]
    return [reasoning("the customer wants a refund"), tool_call("refund", {"order_id": "o_1"}, "call_1")]


def refund_agent(model: Model, effects: list[str] | None = None, *, approve: bool = True) -> Agent[Any]:
    @function_tool(needs_approval=approve)
    def refund(order_id: str) -> str:
        """Refund an order."""
        effect(f"refund {order_id} {use_run().idempotency_key()}", effects)
        conformance.effect(f"refund {order_id}")
        return f"refunded {order_id}"

    return Agent(name="support", instructions="You refund orders.", tools=[refund], model=model)


# -- a tool that hangs (in the process that will be killed) ---------------------------------


def charge_script(items: Items) -> list[TResponseOutputItem]:
    if "call_c" in outputs(items):
        return [message(f"done: {outputs(items)['call_c']}")]
    return [tool_call("charge", {"amount": 5}, "call_c")]


@function_tool
async def charge(amount: int) -> str:
    """Charge the card."""
    await conformance.crash_point()  # the conformance suite kills the process here
    conformance.effect(f"charge {amount}")
    return f"charged {amount}"


AGENTS = {
    "refund": refund_agent(ScriptedModel(refund_script)),
    "crashable": Agent(
        name="biller", instructions="You charge cards.", tools=[charge], model=ScriptedModel(charge_script)
    ),
}
