"""Microsoft Agent Framework agents and a scripted chat client for the adapter's tests (importable by a child).

The client never touches the network: ``script(messages)`` gives the assistant message for the
messages it was called with, and every call is counted. Effects and model calls are also
appended to the files named by ``EFFECTS_FILE`` and ``MODEL_CALLS_FILE`` when set, so a count
survives the process that made it (a killed child, a restarted server).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
    tool,
)

from agent_unit import use_run
from agent_unit.testing import adapters as conformance

Script = Callable[[Sequence[Message]], Message]


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


def say(text: str) -> Message:
    return Message(role="assistant", contents=[Content.from_text(text)])


def call(name: str, arguments: dict[str, Any], call_id: str) -> Content:
    return Content.from_function_call(call_id=call_id, name=name, arguments=json.dumps(arguments))


def results(messages: Sequence[Message]) -> dict[str, Any]:
    """The function results the model was given so far, by call id."""
    return {c.call_id: c.result for m in messages for c in m.contents if c.type == "function_result"}


class ScriptedClient(FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], BaseChatClient[Any]):
    """A chat client that answers from a script and counts its calls (``calls`` holds each call's messages)."""

    OTEL_PROVIDER_NAME = "scripted-provider"

    def __init__(self, script: Script, *, model: str = "scripted", can_stream: bool = True) -> None:
        super().__init__()
        self.script = script
        self.model = model
        self.can_stream = can_stream
        self.calls: list[list[Message]] = []
        self.streamed: list[bool] = []  # per call: was it asked to stream

    def _inner_get_response(self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any) -> Any:
        self.streamed.append(stream)
        if stream and not self.can_stream:
            raise NotImplementedError("this client does not stream")
        self.calls.append(list(messages))
        _append("MODEL_CALLS_FILE", f"{self.model} {len(messages)}")
        conformance.model_called(f"{self.model} {len(messages)}")
        message = self.script(messages)
        usage = {"input_token_count": 10, "output_token_count": 5, "total_token_count": 15}
        if not stream:

            async def whole() -> ChatResponse:
                return ChatResponse(messages=[message], model=self.model, usage_details=usage)  # type: ignore[arg-type]

            return whole()

        async def updates() -> AsyncIterator[ChatResponseUpdate]:
            for content in message.contents:  # text in word-sized deltas, as a provider streams it
                pieces = content.text.split(" ") if content.type in {"text", "text_reasoning"} and content.text else []
                for index, word in enumerate(pieces):
                    delta = word if index == 0 else f" {word}"
                    part = (
                        Content.from_text(delta) if content.type == "text" else Content.from_text_reasoning(text=delta)
                    )
                    yield ChatResponseUpdate(role="assistant", contents=[part], message_id="m", model=self.model)
                if not pieces:
                    yield ChatResponseUpdate(role="assistant", contents=[content], message_id="m", model=self.model)
            yield ChatResponseUpdate(role="assistant", contents=[Content.from_usage(usage)], message_id="m")  # type: ignore[arg-type]

        return self._build_response_stream(updates())


# -- a refund that needs approval ------------------------------------------------------------


def refund_script(messages: Sequence[Message]) -> Message:
    """Ask for the refund; once its result is in, say what happened."""
    if "call_1" in results(messages):
        return say(f"done: {results(messages)['call_1']}")
    reasoning = Content.from_text_reasoning(text="the customer wants a refund")
    return Message(role="assistant", contents=[reasoning, call("refund", {"order_id": "o_1"}, "call_1")])


def refund_agent(client: ScriptedClient, effects: list[str] | None = None, *, approve: bool = True) -> Agent[Any]:
    @tool(approval_mode="always_require" if approve else "never_require")
    def refund(order_id: str) -> str:
        """Refund an order."""
        effect(f"refund {order_id} {use_run().idempotency_key()}", effects)
        conformance.effect(f"refund {order_id}")
        return f"refunded {order_id}"

    return Agent(client, "You refund orders.", name="support", description="Refunds orders.", tools=[refund])


# -- a tool that hangs (in the process that will be killed) ---------------------------------


def charge_script(messages: Sequence[Message]) -> Message:
    if "call_c" in results(messages):
        return say(f"done: {results(messages)['call_c']}")
    return Message(role="assistant", contents=[call("charge", {"amount": 5}, "call_c")])


@tool
async def charge(amount: int) -> str:
    """Charge the card."""
    await conformance.crash_point()  # the conformance suite kills the process here
    conformance.effect(f"charge {amount}")
    return f"charged {amount}"


AGENTS = {
    "refund": refund_agent(ScriptedClient(refund_script)),
    "crashable": Agent(ScriptedClient(charge_script), "You charge cards.", name="biller", tools=[charge]),
}
