"""PydanticAI: a scripted FunctionModel calls ``refund``, a tool that needs approval."""

from __future__ import annotations

import json
from typing import Any

from effects import record
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from agent_unit import use_run


def _answer(messages: list[ModelMessage]) -> str:
    last = messages[-1]
    parts = last.parts if isinstance(last, ModelRequest) else []
    returned = [part.content for part in parts if isinstance(part, ToolReturnPart)]
    return f"done: {returned[0] if returned else 'nothing'}"


def _request(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    record(f"model pydantic_ai {len(messages)}")
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("refund", {"order_id": "o_1"}, tool_call_id="call_1")])
    return ModelResponse(parts=[TextPart(_answer(messages))])


async def _stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
    record(f"model pydantic_ai {len(messages)}")
    if len(messages) == 1:
        yield {0: DeltaToolCall(name="refund", json_args=json.dumps({"order_id": "o_1"}), tool_call_id="call_1")}
    else:
        yield _answer(messages)


agent = Agent(
    FunctionModel(_request, stream_function=_stream, model_name="scripted"),
    name="support",
    description="Refunds orders (PydanticAI, scripted model).",
)


@agent.tool_plain(requires_approval=True)
def refund(order_id: str) -> str:
    record(f"refund {order_id} {use_run().idempotency_key()}")
    return f"refunded {order_id}"
