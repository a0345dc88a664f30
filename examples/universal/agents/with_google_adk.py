"""Google ADK: a scripted BaseLlm calls ``refund``, a FunctionTool that needs confirmation."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from effects import record
from google.adk.agents import Agent
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.tools import FunctionTool
from google.genai import types

from agent_unit import use_run


class ScriptedLlm(BaseLlm):
    """Calls ``refund`` once, then says what it answered. No network."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        record(f"model google_adk {len(llm_request.contents)}")
        last = llm_request.contents[-1]
        answered: list[Any] = [p.function_response.response for p in last.parts or [] if p.function_response]
        if not answered:
            call = types.FunctionCall(name="refund", args={"order_id": "o_1"}, id="call_1")
            parts = [types.Part(function_call=call)]
        else:
            parts = [types.Part(text=f"done: {answered[0].get('result', answered[0].get('error'))}")]
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=10, candidates_token_count=5, total_token_count=15
        )
        yield LlmResponse(content=types.Content(role="model", parts=parts), usage_metadata=usage)


def refund(order_id: str) -> str:
    """Refunds an order."""
    record(f"refund {order_id} {use_run().idempotency_key()}")
    return f"refunded {order_id}"


agent = Agent(
    name="support",
    model=ScriptedLlm(model="scripted"),
    description="Refunds orders (Google ADK, scripted model).",
    tools=[FunctionTool(refund, require_confirmation=True)],
)
