"""Google ADK agents for the adapter's tests, with a scripted model (a ``BaseLlm`` that answers from a script).

Every model call and every effect is recorded with :func:`record`: in ``LOG`` in this process,
and in the file named by ``EFFECTS_FILE`` when it is set, so a count survives a process that
is restarted or killed.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

from google.adk.agents import Agent
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.tools import FunctionTool, ToolContext
from google.genai import types
from pydantic import BaseModel

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


Script = Callable[[LlmRequest], list[types.Part]]


class ScriptedLlm(BaseLlm):
    """A model that answers from ``script(request)``; text is streamed in two chunks, with token usage."""

    script: Any
    label: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        record(f"model {self.label} {len(llm_request.contents)}")
        conformance.model_called(f"{self.label} {len(llm_request.contents)}")
        parts: list[types.Part] = self.script(llm_request)
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=10, candidates_token_count=5, total_token_count=15
        )
        for part in parts if stream else []:
            if part.text:
                half = len(part.text) // 2
                for chunk in (part.text[:half], part.text[half:]):
                    chunked = types.Part(text=chunk, thought=part.thought)
                    yield LlmResponse(content=types.Content(role="model", parts=[chunked]), partial=True)
        yield LlmResponse(content=types.Content(role="model", parts=parts), usage_metadata=usage)


def call(name: str, arguments: dict[str, Any], call_id: str | None) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=arguments, id=call_id))


def responses(request: LlmRequest) -> list[Any]:
    """The function responses in the request's last content (what the tools answered)."""
    last = request.contents[-1]
    return [part.function_response.response for part in last.parts or [] if part.function_response is not None]


def scripted(label: str, tool: str, arguments: dict[str, Any], call_id: str | None = "call_1") -> ScriptedLlm:
    """Calls ``tool`` once, then says what it answered."""

    def script(request: LlmRequest) -> list[types.Part]:
        answered = responses(request)
        if not answered:
            return [call(tool, arguments, call_id)]
        answer = answered[0]
        return [types.Part(text=f"done: {answer.get('result', answer.get('error'))}")]

    return ScriptedLlm(model=f"scripted-{label}", script=script, label=label)


# -- a refund that needs a human's confirmation ---------------------------------------------


def refund(order_id: str) -> str:
    """Refunds an order."""
    record(f"refund {order_id} {use_run().idempotency_key()}")
    conformance.effect(f"refund {order_id}")
    return f"refunded {order_id}"


support = Agent(
    name="support",
    model=scripted("support", "refund", {"order_id": "o_1"}),
    description="Refunds orders.",
    tools=[FunctionTool(refund, require_confirmation=True)],
)


# -- a charge that the conformance suite kills the process in the middle of ---------------------------------


async def charge(amount: int) -> str:
    """Charges an amount."""
    await conformance.crash_point()  # the conformance suite kills the process here
    conformance.effect(f"charge {amount}")
    return f"charged {amount}"


charger = Agent(name="charger", model=scripted("charger", "charge", {"amount": 42}), tools=[charge])


# -- structured output -------------------------------------------------------------------


class Invoice(BaseModel):
    number: str
    total: float


invoicer = Agent(
    name="invoicer",
    model=ScriptedLlm(
        model="scripted-invoicer",
        label="invoicer",
        script=lambda request: [types.Part(text='{"number": "INV-7", "total": 12.5}')],
    ),
    output_schema=Invoice,
)


# -- a conversation that continues on its thread -------------------------------------------


def _chat(request: LlmRequest) -> list[types.Part]:
    prompts = [
        part.text for content in request.contents if content.role == "user" for part in content.parts or [] if part.text
    ]
    return [types.Part(text=" | ".join(prompts))]


chat = Agent(name="chat", model=ScriptedLlm(model="scripted-chat", label="chat", script=_chat))


# -- a tool that asks for its own confirmation -------------------------------------------


def transfer(amount: int, tool_context: ToolContext) -> str:
    """Transfers money, once a human confirms."""
    confirmation = tool_context.tool_confirmation
    if confirmation is None:
        tool_context.request_confirmation(hint=f"transfer {amount}?", payload={"amount": amount})
        return "waiting for a human"
    if not confirmation.confirmed:
        return f"not transferred (asked: {confirmation.hint})"
    record(f"transfer {amount} {use_run().idempotency_key()}")
    return f"transferred {amount}"


banker = Agent(name="banker", model=scripted("banker", "transfer", {"amount": 7}), tools=[transfer])


AGENTS = {"banker": banker, "support": support, "charger": charger, "invoicer": invoicer, "chat": chat}
