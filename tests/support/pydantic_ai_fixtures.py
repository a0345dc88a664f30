"""PydanticAI agents for the adapter's tests, scripted with PydanticAI's own test models.

Every model call and every effect is recorded with :func:`record`: in ``LOG`` in this process,
and in the file named by ``EFFECTS_FILE`` when it is set, so a count survives a process that
is restarted or killed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel

from agent_unit import use_run
from agent_unit.testing import adapters as conformance

LOG: list[str] = []


def record(line: str) -> None:
    LOG.append(line)
    if path := os.environ.get("EFFECTS_FILE"):
        with Path(path).open("a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


def _last_tool_return(messages: list[ModelMessage]) -> str:
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    part = last.parts[0]
    assert isinstance(part, ToolReturnPart)
    return str(part.content)


def _scripted(name: str, tool: str, arguments: dict[str, Any]) -> FunctionModel:
    """A model that calls ``tool`` once, then answers with what the tool returned (streamed)."""

    def request(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        record(f"model {name} {len(messages)}")
        conformance.model_called(f"{name} {len(messages)}")
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart(tool, arguments, tool_call_id="call_1")])
        return ModelResponse(parts=[TextPart(f"done: {_last_tool_return(messages)}")])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        record(f"model {name} {len(messages)}")
        conformance.model_called(f"{name} {len(messages)}")
        if len(messages) == 1:
            yield {0: DeltaToolCall(name=tool, json_args=_json(arguments), tool_call_id="call_1")}
        else:
            yield "done: "
            yield _last_tool_return(messages)

    return FunctionModel(request, stream_function=stream, model_name=f"scripted-{name}")


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


# -- a refund that needs a human's approval -----------------------------------------------

support = Agent(_scripted("support", "refund", {"order_id": "o_1"}), name="support", description="Refunds orders.")


@support.tool_plain(requires_approval=True)
def refund(order_id: str) -> str:
    record(f"refund {order_id} {use_run().idempotency_key()}")
    conformance.effect(f"refund {order_id}")
    return f"refunded {order_id}"


# -- a charge that the conformance suite kills the process in the middle of ---------------------------------

charger = Agent(_scripted("charger", "charge", {"amount": 42}), name="charger")


@charger.tool_plain
async def charge(amount: int) -> str:
    await conformance.crash_point()  # the conformance suite kills the process here
    conformance.effect(f"charge {amount}")
    return f"charged {amount}"


# -- structured output -------------------------------------------------------------------


class Invoice(BaseModel):
    number: str
    total: float


invoicer = Agent(TestModel(custom_output_args={"number": "INV-7", "total": 12.5}), output_type=Invoice)


# -- a conversation that continues on its thread -------------------------------------------


def _chat(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompts = [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if part.part_kind == "user-prompt"
    ]
    record(f"model chat {len(messages)}")
    return ModelResponse(parts=[TextPart(" | ".join(prompts))])


chat = Agent(FunctionModel(_chat), name="chat")


# -- a tool that asks a human with use_run().interrupt() -----------------------------------


class Size(BaseModel):
    size: str


asker = Agent(_scripted("asker", "order_shirt", {"color": "blue"}), name="asker")


@asker.tool_plain
async def order_shirt(color: str) -> str:
    answer = await use_run().interrupt("pick-size", {"color": color}, answer=Size)
    record(f"order {color} {answer.size}")
    return f"ordered a {answer.size} {color} shirt"


AGENTS = {"support": support, "charger": charger, "invoicer": invoicer, "chat": chat, "asker": asker}
