"""A PydanticAI run traced to an OTLP endpoint by the standard ``OTEL_*`` environment, over two processes.

``python -m tests.support.phoenix_run start DB``: starts ``support`` over the SQLite file ``DB``;
the model calls a tool, then asks to refund, which needs approval: the run parks. Prints its id.
``python -m tests.support.phoenix_run resume DB RUN_ID``: approves it; the refund runs and the model answers.
PydanticAI's own instrumentation is on, so its spans nest under agent-unit's.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent_unit import RunEngine, telemetry


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returned = [
        part.tool_name
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    if not returned:
        return ModelResponse(parts=[ToolCallPart("lookup_order", {"order_id": "o_17"}, tool_call_id="call_lookup")])
    if returned == ["lookup_order"]:
        return ModelResponse(parts=[ToolCallPart("refund", {"order_id": "o_17"}, tool_call_id="call_refund")])
    return ModelResponse(parts=[TextPart("Refunded order o_17: 42.00 EUR is on its way.")])


support = Agent(FunctionModel(_model, model_name="gpt-5-mini"), name="support", description="Refunds orders.")
support.instrument = True  # PydanticAI's own spans, through the global TracerProvider


@support.tool_plain
def lookup_order(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "amount": "42.00 EUR", "status": "delivered"}


@support.tool_plain(requires_approval=True)
def refund(order_id: str) -> str:
    return f"refund of {order_id} sent"


AGENTS = {"support": support}


async def main(command: str, db: str, value: str) -> None:
    engine = RunEngine(AGENTS, f"sqlite:///{db}")
    try:
        if command == "start":
            record = await engine.start("support", {"prompt": "Please refund order o_17."}, wait=True)
            assert record.status == "interrupted", record
            print(record.id)
        else:
            record = await engine.resume(value, True, wait=True)
            assert record.status == "completed", record
    finally:
        await engine.aclose()
        telemetry.flush()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3], sys.argv[3] if len(sys.argv) > 3 else ""))
