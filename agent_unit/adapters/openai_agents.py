"""The built-in adapter for the OpenAI Agents SDK (``openai-agents``, imported as ``agents``).

``Runner.run`` drives its own loop (call the model, run tools, hand off, call the model
again) and cannot resume in the middle of it. So the adapter makes that loop replayable
instead: every model call goes through a journaled model and every function tool through a
journaled tool. Executing the run again (after a crash, a restart or an approval) runs the
SDK's loop from the start, the journal answers every call already made, and the loop
reaches the point where it stopped without repeating a model call or a tool.

- Model calls: ``RunConfig(model_provider=...)`` resolves model names as the SDK's default
  provider does, and a ``Model`` instance set on an agent is wrapped where it is. A response
  is journaled by its result (output items, usage, response id) with a hash of a stable view
  of the request, so a replay that asks something else is an error, never a stale answer.
- Function tools: the agent, and every agent reachable through its handoffs, is cloned with
  each ``FunctionTool`` journaled under its tool call id (``use_run().idempotency_key()``
  works inside it). ``needs_approval`` becomes the shared ``tool-approval`` interrupt, so a
  run waits for a human as a parked run, not as an SDK ``RunState`` to keep somewhere.
- The conversation continues on the run's thread: its history is kept in thread state.
- With OpenTelemetry on, the SDK's own spans nest under the run's (``openai_agents_tracing``).

Not journaled, so they run again on a replay: MCP server tools, guardrails, lifecycle hooks
and ``on_handoff`` callbacks. Keep them free of side effects. Hosted tools (web search, file
search, code interpreter...) run on the provider's side inside the model call, so their
results are journaled with its response. An agent used as a tool (``Agent.as_tool``) is one
journaled tool call.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import uuid
import weakref
from collections.abc import AsyncIterator
from typing import Any

import agents
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.tool import DEFAULT_APPROVAL_REJECTION_MESSAGE, FunctionTool, Tool
from agents.tool_context import ToolContext
from agents.usage import Usage, deserialize_usage, serialize_usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputRefusal, ResponseOutputText
from openai.types.responses.response_reasoning_item import ResponseReasoningItem
from pydantic import BaseModel, TypeAdapter
from pydantic_core import to_jsonable_python

from .. import telemetry
from ..errors import AdapterError
from .api import AdapterContext, define_adapter
from .approval import ask_approval
from .messages import MessageStream
from .prompt import Prompt

__all__ = ["adapter"]

HISTORY = "openai-agents:history"
_OUTPUT_ITEMS: TypeAdapter[list[TResponseOutputItem]] = TypeAdapter(list[TResponseOutputItem])


def _plain(value: Any) -> Any:
    """JSON data for ``value``: pydantic items by their wire names, unknown objects by their type only.

    Never an object's ``repr``: one holding a memory address would differ on every replay.
    """
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return to_jsonable_python(value, fallback=lambda other: type(other).__qualname__)


# -- model calls ---------------------------------------------------------------------------


def _usage(model: str, usage: Usage) -> dict[str, Any] | None:
    """The response's token usage as agent-unit records it; ``None`` when the model reported none."""
    if not (usage.input_tokens or usage.output_tokens or usage.total_tokens):
        return None
    spent: dict[str, Any] = {
        "provider": "openai",
        "model": model,
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "totalTokens": usage.total_tokens,
    }
    if reasoning := getattr(usage.output_tokens_details, "reasoning_tokens", 0):
        spent["reasoningTokens"] = reasoning
    if cached := getattr(usage.input_tokens_details, "cached_tokens", 0):
        spent["cachedInputTokens"] = cached
    return spent


def _message_id(item: TResponseOutputItem) -> str:
    """The item's id; a new one where the model gave none (Chat Completions models give a placeholder)."""
    given = getattr(item, "id", None)
    return given if isinstance(given, str) and given and given != FAKE_RESPONSES_ID else uuid.uuid4().hex


def _stream(ctx: AdapterContext, response: ModelResponse) -> None:
    """The response's text and reasoning as AG-UI events (called inside the journaled call only)."""
    stream = MessageStream(ctx.stream)
    for item in response.output:
        message_id = _message_id(item)
        if isinstance(item, ResponseOutputMessage):
            for part in item.content:
                if isinstance(part, ResponseOutputText | ResponseOutputRefusal):
                    stream.text(message_id, part.text if isinstance(part, ResponseOutputText) else part.refusal)
        elif isinstance(item, ResponseReasoningItem):
            for text in [part.text for part in item.summary] + [part.text for part in item.content or []]:
                stream.reasoning(message_id, text)
        stream.end(message_id)


class JournaledModel(agents.Model):
    """A model whose responses are journaled: a replay returns them without calling the model."""

    def __init__(self, model: agents.Model, name: str, ctx: AdapterContext) -> None:
        self.model = model
        self.name = name
        self._ctx = ctx

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: agents.ModelSettings,
        tools: list[Tool],
        output_schema: agents.AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: agents.ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
    ) -> ModelResponse:
        async def call(_request: Any) -> dict[str, Any]:
            response = await self.model.get_response(
                system_instructions,
                input,
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )
            _stream(self._ctx, response)
            return {
                "output": _plain(response.output),
                "usage": serialize_usage(response.usage),
                "response_id": response.response_id,
                "request_id": response.request_id,
            }

        # What was asked, in a form that is the same on every replay: not the settings (the SDK
        # may put a per-run prompt cache key there) and no object whose repr holds an address.
        request = {
            "instructions": system_instructions,
            "input": _plain(input),
            "tools": [getattr(tool, "name", type(tool).__name__) for tool in tools],
            "output": output_schema.name() if output_schema is not None else None,
            "handoffs": [handoff.tool_name for handoff in handoffs],
        }
        journaled = await self._ctx.durable.model(
            call, name=self.name, usage=lambda result: _usage(self.name, deserialize_usage(result["usage"]))
        )(request)
        return ModelResponse(
            output=_OUTPUT_ITEMS.validate_python(journaled["output"]),
            usage=deserialize_usage(journaled["usage"]),
            response_id=journaled["response_id"],
            request_id=journaled["request_id"],
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise AdapterError(
            "agent-unit runs OpenAI agents with Runner.run and journals whole responses: "
            "a streamed model call (Runner.run_streamed) is not supported inside a run"
        )

    def get_retry_advice(self, request: Any) -> Any:
        return self.model.get_retry_advice(request)

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self.model._cleanup_on_run_end(owner)

    async def close(self) -> None:
        await self.model.close()


def _model_name(model: agents.Model, requested: str | None) -> str:
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else requested or "model"


class JournaledProvider(agents.ModelProvider):
    """Resolves model names as ``RunConfig``'s default provider would, and journals the models."""

    def __init__(self, ctx: AdapterContext) -> None:
        self._ctx = ctx
        self._default: agents.ModelProvider | None = None

    def get_model(self, model_name: str | None) -> agents.Model:
        if self._default is None:
            self._default = agents.MultiProvider()
        return self.wrap(self._default.get_model(model_name), model_name)

    def wrap(self, model: agents.Model, requested: str | None = None) -> agents.Model:
        return JournaledModel(model, _model_name(model, requested), self._ctx)

    async def aclose(self) -> None:
        if self._default is not None:
            await self._default.aclose()


# -- tools and handoffs ---------------------------------------------------------------------


def _arguments(input_json: str) -> dict[str, Any]:
    """A tool call's arguments as a dict (what the approval shows and the journal hashes)."""
    try:
        parsed = json.loads(input_json) if input_json else {}
    except ValueError:
        return {"arguments": input_json}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


async def _needs_approval(tool: FunctionTool, context: ToolContext[Any], arguments: dict[str, Any]) -> bool:
    """The tool's own policy; a callable one runs on every execution, so it must decide the same way."""
    policy = tool.needs_approval
    if not callable(policy):
        return bool(policy)
    answer = policy(context, arguments, context.tool_call_id)
    return bool(await answer if inspect.isawaitable(answer) else answer)


class Journaling:
    """Clones an agent graph so that its function tools are journaled and its models too."""

    def __init__(self, ctx: AdapterContext, provider: JournaledProvider) -> None:
        self._ctx = ctx
        self._provider = provider
        # by id of the original (and of the clone), each kept alive so that no id is reused
        self._clones: dict[int, tuple[agents.Agent[Any], agents.Agent[Any]]] = {}

    def agent(self, agent: agents.Agent[Any]) -> agents.Agent[Any]:
        if id(agent) in self._clones:
            return self._clones[id(agent)][1]
        changes: dict[str, Any] = {"tools": [self._tool(tool, agent.name) for tool in agent.tools], "handoffs": []}
        if isinstance(agent.model, agents.Model):  # the SDK uses it as is, without asking the provider
            changes |= {"model": self._provider.wrap(agent.model), "model_settings": agent.model_settings}
        clone = agent.clone(**changes)
        self._clones[id(agent)] = self._clones[id(clone)] = (agent, clone)
        clone.handoffs = [self._handoff(item) for item in agent.handoffs]  # after: handoffs may loop back
        return clone

    def _handoff(self, item: agents.Agent[Any] | Handoff[Any, Any]) -> agents.Agent[Any] | Handoff[Any, Any]:
        if isinstance(item, agents.Agent):
            return self.agent(item)
        invoke = item.on_invoke_handoff

        async def on_invoke_handoff(context: Any, input_json: str) -> agents.Agent[Any]:
            return self.agent(await invoke(context, input_json))

        wrapped = dataclasses.replace(item, on_invoke_handoff=on_invoke_handoff)
        reference = getattr(item, "_agent_ref", None)  # set by handoff(): the target agent
        target = reference() if reference is not None else None
        if isinstance(target, agents.Agent):
            wrapped._agent_ref = weakref.ref(self.agent(target))
        return wrapped

    def _tool(self, tool: Tool, agent: str) -> Tool:
        if not isinstance(tool, FunctionTool):
            return tool  # hosted and other tools pass through (see the module docstring)
        run = self._ctx.run
        original = tool.on_invoke_tool

        async def on_invoke_tool(context: ToolContext[Any], input_json: str) -> Any:
            arguments = _arguments(input_json)
            call_id = context.tool_call_id
            if await _needs_approval(tool, context, arguments):
                # One interrupt per call, journaled under its call id.
                approval = await ask_approval(run, call_id=call_id, tool=tool.name, arguments=arguments, agent=agent)
                if not approval.approved:  # what the SDK tells the model about a rejected call
                    reason = f" Reason: {approval.reason}" if approval.reason else ""
                    return DEFAULT_APPROVAL_REJECTION_MESSAGE + reason

            async def invoke(**_arguments: Any) -> Any:
                # As JSON, so the run and its replays hand the SDK the same value; pydantic outputs
                # keep their defaults: ToolOutputText's "type" is what marks it as one.
                return to_jsonable_python(await original(context, input_json), by_alias=True, fallback=str)

            return await self._ctx.durable.tools({tool.name: invoke})[tool.name](arguments, call_id=call_id)

        return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool, needs_approval=False)


# -- the adapter --------------------------------------------------------------------------


async def _run(agent: agents.Agent[Any], ctx: AdapterContext) -> Any:
    prompt = Prompt.model_validate(ctx.input).prompt

    async def read_history() -> Any:
        return await ctx.kv.get(HISTORY)

    history = await ctx.durable.value(HISTORY, read_history) or []
    active = telemetry.active()
    if active is not None:  # the SDK's spans under the execution's (imports OpenTelemetry: only when on)
        from .openai_agents_tracing import bridge

        bridge(active)
    provider = JournaledProvider(ctx)
    try:
        result = await agents.Runner.run(
            Journaling(ctx, provider).agent(agent),
            [*history, {"role": "user", "content": prompt}],
            run_config=agents.RunConfig(model_provider=provider),
        )
    finally:
        await provider.aclose()
    conversation = _plain(result.to_input_list())

    async def save_history() -> None:  # journaled: a replay of a finished run does not write it again
        await ctx.kv.set(HISTORY, conversation)

    await ctx.durable.value(f"{HISTORY}:save", save_history)
    return result.final_output


def _describe(agent: agents.Agent[Any]) -> dict[str, Any]:
    text = agent.handoff_description or (agent.instructions if isinstance(agent.instructions, str) else "")
    line = text.strip().split("\n", 1)[0] if text else ""
    return {"description": line if len(line) <= 200 else line[:199] + "…", "input_type": Prompt}


adapter = define_adapter(
    name="openai-agents",
    match=lambda value: isinstance(value, agents.Agent),
    describe=_describe,
    run=_run,
)
