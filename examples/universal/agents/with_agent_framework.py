"""Microsoft Agent Framework: a scripted chat client calls ``refund``, a tool that needs approval."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    Message,
    tool,
)
from effects import record

from agent_unit import use_run


class ScriptedClient(FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], BaseChatClient[Any]):
    """Asks for the refund; once its result is in, says what happened. No network, no streaming."""

    OTEL_PROVIDER_NAME = "scripted-provider"

    def _inner_get_response(self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any) -> Any:
        if stream:
            raise NotImplementedError("this client does not stream")
        record(f"model agent_framework {len(messages)}")
        results = {c.call_id: c.result for m in messages for c in m.contents if c.type == "function_result"}
        if "call_1" in results:
            message = Message(role="assistant", contents=[Content.from_text(f"done: {results['call_1']}")])
        else:
            arguments = json.dumps({"order_id": "o_1"})
            call = Content.from_function_call(call_id="call_1", name="refund", arguments=arguments)
            message = Message(role="assistant", contents=[call])
        usage = {"input_token_count": 10, "output_token_count": 5, "total_token_count": 15}

        async def whole() -> ChatResponse:
            return ChatResponse(messages=[message], model="scripted", usage_details=usage)  # type: ignore[arg-type]

        return whole()


@tool(approval_mode="always_require")
def refund(order_id: str) -> str:
    """Refund an order."""
    record(f"refund {order_id} {use_run().idempotency_key()}")
    return f"refunded {order_id}"


agent = Agent(ScriptedClient(), "You refund orders.", name="support", description="Refunds orders.", tools=[refund])
