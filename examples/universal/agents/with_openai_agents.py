"""OpenAI Agents SDK: a scripted Model calls ``refund``, a function tool that needs approval."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Model, ModelResponse, Usage, function_tool, set_tracing_disabled
from agents.items import TResponseOutputItem
from effects import record
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from pydantic import BaseModel

from agent_unit import use_run

set_tracing_disabled(True)  # offline: no trace export


def _outputs(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {item["call_id"]: item["output"] for item in items if item.get("type") == "function_call_output"}


class ScriptedModel(Model):
    """Asks for the refund; once its output is in, says what happened. No network."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else [_dict(i) for i in input]
        record(f"model openai_agents {len(items)}")
        output: list[TResponseOutputItem]
        if "call_1" in _outputs(items):
            text = ResponseOutputText(text=f"done: {_outputs(items)['call_1']}", type="output_text", annotations=[])
            output = [
                ResponseOutputMessage(id="msg_1", content=[text], role="assistant", status="completed", type="message")
            ]
        else:
            arguments = json.dumps({"order_id": "o_1"})
            call = ResponseFunctionToolCall(
                id="fc_1", call_id="call_1", name="refund", arguments=arguments, type="function_call"
            )
            output = [call]
        usage = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
        return ModelResponse(output=output, usage=usage, response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")
        yield  # an async generator


def _dict(item: Any) -> dict[str, Any]:
    return item.model_dump(exclude_unset=True) if isinstance(item, BaseModel) else dict(item)


@function_tool(needs_approval=True)
def refund(order_id: str) -> str:
    """Refund an order."""
    record(f"refund {order_id} {use_run().idempotency_key()}")
    return f"refunded {order_id}"


agent = Agent(name="support", instructions="You refund orders.", tools=[refund], model=ScriptedModel())
