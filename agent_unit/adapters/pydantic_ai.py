"""PydanticAI agents, durable unchanged.

The adapter runs the user's ``Agent`` with one extra capability, added for the run only:

- every model request goes through ``ctx.durable.model``: it is streamed live (text and
  reasoning reach the event stream as they arrive) and journaled by its response, so a
  replay sends nothing and a changed request is a clear error;
- every tool call, MCP toolsets included, goes through ``ctx.durable.tools``, keyed by
  PydanticAI's tool call id, so a tool re-run after a crash keeps its idempotency key;
- a tool with ``requires_approval=True`` pauses the run as a ``tool-approval`` interrupt;
  a declined call is answered to the model with PydanticAI's own ``ToolDenied``.

The thread's conversation lives in the run's thread state, so a second run on the same
thread continues it. Tool results are journaled as JSON: a tool that returns rich
content (``ToolReturn``, binary content) gets its JSON form back on replay.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
)
from pydantic_ai.models import CompletedStreamedResponse, Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, RunContext, ToolDenied
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import to_jsonable_python

from ..run import current_step
from .api import AdapterContext, define_adapter
from .approval import ask_approval
from .messages import MessageStream
from .prompt import Prompt

__all__ = ["Prompt", "adapter"]

HISTORY = "pydantic-ai:messages"
"""The thread state key of the conversation so far."""

_VOLATILE = frozenset({"timestamp", "run_id", "conversation_id"})
"""Message fields that differ between a run and its replay without changing what is asked."""


def _fingerprint(
    messages: list[ModelMessage], settings: ModelSettings | None, parameters: ModelRequestParameters
) -> dict[str, Any]:
    """What a model request asks, without the timestamps and ids that change on every replay."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: strip(item) for key, item in value.items() if key not in _VOLATILE}
        if isinstance(value, list):
            return [strip(item) for item in value]
        return value

    return {
        "messages": strip(ModelMessagesTypeAdapter.dump_python(messages, mode="json")),
        "settings": to_jsonable_python(settings, fallback=repr),
        "parameters": to_jsonable_python(parameters, fallback=repr),
    }


def _usage(model: Model) -> Any:
    def usage(response: ModelResponse) -> dict[str, Any]:
        spent = response.usage
        entry = {
            "provider": response.provider_name or model.system,
            "model": response.model_name or model.model_name,
            "inputTokens": spent.input_tokens,
            "outputTokens": spent.output_tokens,
            "totalTokens": spent.input_tokens + spent.output_tokens,
        }
        if spent.cache_read_tokens:
            entry["cachedInputTokens"] = spent.cache_read_tokens
        if spent.cache_write_tokens:
            entry["cacheWriteInputTokens"] = spent.cache_write_tokens
        reasoning = spent.details.get("reasoning_tokens") if spent.details else None
        if reasoning:
            entry["reasoningTokens"] = reasoning
        return entry

    return usage


class _JournaledModel(WrapperModel):
    """The run's model: each request is streamed once, then answered from the journal."""

    def __init__(self, wrapped: Model, context: AdapterContext) -> None:
        super().__init__(wrapped)
        self._context = context

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        async def live(_: Any) -> ModelResponse:
            return await self._stream(messages, model_settings, model_request_parameters)

        call = self._context.durable.model(
            live, name=self.wrapped.model_name, response_type=ModelResponse, usage=_usage(self.wrapped)
        )
        response: ModelResponse = await call(_fingerprint(messages, model_settings, model_request_parameters))
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        """For ``run_stream`` and event stream handlers: the journaled response, replayed as events."""
        response = await self.request(messages, model_settings, model_request_parameters)
        yield CompletedStreamedResponse(response, model_request_parameters=model_request_parameters, replay_events=True)

    async def _stream(
        self, messages: list[ModelMessage], settings: ModelSettings | None, parameters: ModelRequestParameters
    ) -> ModelResponse:
        """Send the request, streaming text and reasoning to the run's events as they arrive."""
        step = current_step()
        prefix = step.key if step is not None else "model"
        stream = MessageStream(self._context.stream)
        started = False
        try:
            async with self.wrapped.request_stream(messages, settings, parameters) as streamed:
                async for event in streamed:
                    started = True
                    _forward(stream, prefix, event)
            stream.close()
            return streamed.get()
        except (NotImplementedError, AssertionError):
            if started:  # the stream broke midway: a real failure, not a model that cannot stream
                raise
        # A model that cannot stream (a FunctionModel without a stream function): ask once, show it whole.
        response = await self.wrapped.request(messages, settings, parameters)
        for index, part in enumerate(response.parts):
            _forward(stream, prefix, PartStartEvent(index=index, part=part))
        stream.close()
        return response


def _forward(stream: MessageStream, prefix: str, event: Any) -> None:
    if isinstance(event, PartStartEvent):
        message_id = f"{prefix}:{event.index}"
        if isinstance(event.part, TextPart):
            stream.text(message_id, event.part.content)
        elif isinstance(event.part, ThinkingPart):
            stream.reasoning(message_id, event.part.content)
    elif isinstance(event, PartDeltaEvent):
        message_id = f"{prefix}:{event.index}"
        if isinstance(event.delta, TextPartDelta):
            stream.text(message_id, event.delta.content_delta)
        elif isinstance(event.delta, ThinkingPartDelta) and event.delta.content_delta:
            stream.reasoning(message_id, event.delta.content_delta)
    elif isinstance(event, PartEndEvent):
        stream.end(f"{prefix}:{event.index}")


@dataclass
class _JournaledToolset(WrapperToolset[Any]):
    """The run's tools: each call runs once under PydanticAI's tool call id, then replays."""

    context: AdapterContext = field(kw_only=True)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        async def call(**arguments: Any) -> Any:
            return await self.wrapped.call_tool(name, arguments, ctx, tool)

        journaled = self.context.durable.tools({name: call})[name]
        return await journaled(tool_args, call_id=ctx.tool_call_id)


@dataclass
class _Durability(AbstractCapability[Any]):
    """agent-unit's capability, added to one run: journaled model and tools, approvals as interrupts."""

    context: AdapterContext
    agent_name: str

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    def get_wrapper_model(self, model: Model) -> Model | None:
        return _JournaledModel(model, self.context)

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return _JournaledToolset(toolset, context=self.context)

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[Any], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        if not requests.approvals:
            return None  # calls executed outside the run stay the agent's output, as PydanticAI does
        results = DeferredToolResults()
        for call in requests.approvals:
            answer = await ask_approval(
                self.context.run,
                call_id=call.tool_call_id,
                tool=call.tool_name,
                arguments=call.args_as_dict(),
                agent=self.agent_name,
            )
            denied = ToolDenied(answer.reason) if answer.reason else ToolDenied()  # PydanticAI's way of saying no
            results.approvals[call.tool_call_id] = True if answer.approved else denied
        return results


async def _run(agent: Agent[Any, Any], ctx: AdapterContext) -> Any:
    prompt = Prompt.model_validate(ctx.input).prompt

    async def read_history() -> Any:
        return await ctx.kv.get(HISTORY)

    saved = await ctx.durable.value("pydantic-ai:history", read_history)
    history = ModelMessagesTypeAdapter.validate_python(saved) if saved else None
    result = await agent.run(
        prompt,
        message_history=history,
        run_id=ctx.run.id,
        conversation_id=ctx.run.thread_id,
        capabilities=[_Durability(ctx, agent.name or ctx.run.agent)],
    )
    await ctx.kv.set(HISTORY, ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode="json"))
    return result.output


def _describe(agent: Agent[Any, Any]) -> dict[str, Any]:
    return {"description": str(agent.description or ""), "input_type": Prompt}


adapter = define_adapter(
    name="pydantic-ai",
    match=lambda value: isinstance(value, Agent),
    describe=_describe,
    run=_run,
)
