"""Strands Agents (``strands-agents``, imported as ``strands``), durable unchanged.

A Strands ``Agent`` drives its own loop and keeps its conversation on the instance. The adapter
makes that loop replayable, as for the OpenAI Agents SDK: executing a run again (after a
restart, a crash or an approval) runs the loop from the start, the journal answers every call
already made, and the loop reaches the point where it stopped without repeating anything.

- Model calls: the agent's model is wrapped, once, in a :class:`JournaledModel` (a
  ``strands.models.Model``: a hook cannot replace a response). Inside a run it streams the
  response live (text and reasoning reach the event stream) and journals its stream events
  with a hash of the request; a replay yields the journaled events. Outside a run it passes
  everything through.
- Tool calls: a ``BeforeToolCallEvent`` hook, added once, replaces the selected tool with a
  journaled one, keyed by Strands' ``toolUseId`` (``use_run().idempotency_key()`` inside).
- Approvals: ``event.interrupt(name, reason)`` in a ``BeforeToolCallEvent`` hook stops the
  loop (``stop_reason == "interrupt"``); the adapter turns it into the ``tool-approval``
  interrupt and resumes the loop with an ``interruptResponse`` of ``{"approved", "reason"}``.
  A declined call is cancelled the Strands way (``event.cancel_tool``): the model gets an
  error tool result saying so. Any other Strands interrupt (a ``BeforeToolsEvent`` hook)
  becomes an interrupt of its name with its reason as the payload; the answer is the response.
- The conversation continues on the run's thread: the agent's session snapshot (messages,
  state, conversation manager) is kept in thread state. Runs of one agent instance take
  turns in a process (Strands keeps one conversation per instance); a parked run holds nothing.

Not journaled, so they run again on a replay: hooks and plugins (keep them free of side
effects), ``Model.structured_output`` (the deprecated path; ``structured_output_model`` goes
through the journaled stream), and events a tool streams before its result. Results are
journaled as JSON: bytes in a tool result (an image) come back base64-encoded on replay. A
Strands interrupt raised inside a tool is not supported: use ``use_run().interrupt()`` there.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import AsyncGenerator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python
from strands import Agent, Snapshot
from strands.agent.agent_result import AgentResult
from strands.hooks import BeforeModelCallEvent, BeforeToolCallEvent
from strands.models import Model
from strands.types._events import ToolInterruptEvent
from strands.types.events import ToolResultEvent
from strands.types.tools import AgentTool, ToolSpec, ToolUse

from ..errors import AdapterError
from .api import AdapterContext, define_adapter
from .approval import ask_approval
from .messages import MessageStream
from .prompt import Prompt

__all__ = ["JournaledModel", "Prompt", "adapter"]

HISTORY = "strands:snapshot"
"""The thread state key of the agent's session snapshot (its conversation so far)."""

_STRANDS_DEFAULT_NAME = "Strands Agents"
"""The name Strands gives an agent created without one."""

DECLINED = "Tool call declined by a human."
"""What the model is told, as the cancelled call's result, when an approval is declined."""


@dataclass
class _Scope:
    """One execution of a run on one agent: what the hooks and the wrapped model need."""

    ctx: AdapterContext
    agent_name: str
    tool_uses: dict[str, ToolUse] = field(default_factory=dict)
    declined: dict[str, str] = field(default_factory=dict)
    failure: AdapterError | None = None


_scope: ContextVar[_Scope | None] = ContextVar("agent_unit_strands_scope", default=None)


# -- model calls ---------------------------------------------------------------------------


def _provider(model: Model) -> str:
    """``BedrockModel`` -> ``bedrock``: Strands names each provider's model class after it."""
    name = type(model).__name__
    return (name.removesuffix("Model") or name).lower()


def _model_id(model: Model) -> str:
    config = model.get_config()
    given = config.get("model_id") if isinstance(config, dict) else getattr(config, "model_id", None)
    return str(given) if given else type(model).__name__


def _usage(model: Model) -> Any:
    def usage(events: list[dict[str, Any]]) -> dict[str, Any] | None:
        for event in events:
            spent = event.get("metadata", {}).get("usage")
            if spent:
                entry = {
                    "provider": _provider(model),
                    "model": _model_id(model),
                    "inputTokens": spent.get("inputTokens", 0),
                    "outputTokens": spent.get("outputTokens", 0),
                    "totalTokens": spent.get("totalTokens", 0),
                }
                if spent.get("cacheReadInputTokens"):
                    entry["cachedInputTokens"] = spent["cacheReadInputTokens"]
                if spent.get("cacheWriteInputTokens"):
                    entry["cacheWriteInputTokens"] = spent["cacheWriteInputTokens"]
                return entry
        return None

    return usage


def _forward(stream: MessageStream, prefix: str, index: int, event: dict[str, Any]) -> int:
    """Text and reasoning deltas as AG-UI events; the content block index after ``event``."""
    delta = event.get("contentBlockDelta", {}).get("delta", {})
    if "text" in delta:
        stream.text(f"{prefix}:{index}", delta["text"])
    elif "reasoningContent" in delta and delta["reasoningContent"].get("text"):
        stream.reasoning(f"{prefix}:{index}", delta["reasoningContent"]["text"])
    if "contentBlockStop" in event:
        stream.end(f"{prefix}:{index}")
        return index + 1
    return index


class JournaledModel(Model):  # type: ignore[misc]  # strands has no hints where mypy runs (its own venv)
    """The agent's model, journaled inside a run: streamed once, then replayed from the journal."""

    def __init__(self, wrapped: Model) -> None:
        self.wrapped = wrapped

    def update_config(self, **model_config: Any) -> None:
        self.wrapped.update_config(**model_config)

    def get_config(self) -> Any:
        return self.wrapped.get_config()

    @property
    def stateful(self) -> bool:
        return bool(self.wrapped.stateful)

    def structured_output(self, output_model: Any, prompt: Any, system_prompt: str | None = None, **kwargs: Any) -> Any:
        return self.wrapped.structured_output(output_model, prompt, system_prompt, **kwargs)

    async def stream(
        self,
        messages: Any,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[Any, None]:
        scope = _scope.get()
        if scope is None:  # the agent used outside agent-unit: the model as it is
            async for event in self.wrapped.stream(messages, tool_specs, system_prompt, **kwargs):
                yield event
            return
        ctx = scope.ctx

        async def live(_: Any) -> list[dict[str, Any]]:
            stream, prefix, index, events = MessageStream(ctx.stream), uuid.uuid4().hex, 0, []
            async for event in self.wrapped.stream(messages, tool_specs, system_prompt, **kwargs):
                events.append(event)
                index = _forward(stream, prefix, index, event)
            stream.close()
            plain: list[dict[str, Any]] = to_jsonable_python(events, fallback=repr, bytes_mode="base64")
            return plain

        schema = kwargs.get("structured_output_model")
        request = {  # what is asked, without the per-call objects (cancel signal, invocation state)
            "messages": messages,
            "tools": [spec.get("name") for spec in tool_specs or []],
            "system_prompt": system_prompt,
            "tool_choice": kwargs.get("tool_choice"),
            "output": schema.__name__ if isinstance(schema, type) else None,
        }
        call = ctx.durable.model(live, name=_model_id(self.wrapped), usage=_usage(self.wrapped))
        request = to_jsonable_python(request, fallback=lambda other: type(other).__qualname__, bytes_mode="base64")
        for event in await call(request):
            yield event


# -- tool calls ------------------------------------------------------------------------------


class _JournaledTool(AgentTool):  # type: ignore[misc]  # strands has no hints where mypy runs (its own venv)
    """A tool run once under Strands' ``toolUseId``; a replay returns its journaled result."""

    def __init__(self, wrapped: AgentTool, ctx: AdapterContext) -> None:
        super().__init__()
        self.wrapped = wrapped
        self._ctx = ctx

    @property
    def tool_name(self) -> str:
        return str(self.wrapped.tool_name)

    @property
    def tool_spec(self) -> ToolSpec:
        return self.wrapped.tool_spec

    @property
    def tool_type(self) -> str:
        return str(self.wrapped.tool_type)

    async def stream(self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any) -> AsyncGenerator[Any]:
        async def invoke(**_arguments: Any) -> dict[str, Any]:
            last: Any = None
            async for event in self.wrapped.stream(tool_use, invocation_state, **kwargs):
                if isinstance(event, ToolInterruptEvent):
                    raise _unsupported(self.tool_name)
                if isinstance(event, ToolResultEvent):
                    return {"result": to_jsonable_python(event.tool_result, fallback=str, bytes_mode="base64")}
                last = event
            return {
                "raw": to_jsonable_python(last, fallback=str, bytes_mode="base64")
            }  # a tool whose last value is its result

        arguments = tool_use.get("input") or {}
        arguments = arguments if isinstance(arguments, dict) else {"input": arguments}
        journaled = self._ctx.durable.tools({self.tool_name: invoke})[self.tool_name]
        outcome = await journaled(arguments, call_id=tool_use["toolUseId"])
        yield ToolResultEvent(outcome["result"]) if "result" in outcome else outcome["raw"]


def _unsupported(tool_name: str) -> AdapterError:
    """Kept on the scope too: Strands turns a tool's exception into its result, and the run must fail."""
    error = AdapterError(
        f"tool {tool_name!r} raised a Strands interrupt, which agent-unit cannot resume inside a tool: "
        "call use_run().interrupt(name, payload) there instead"
    )
    scope = _scope.get()
    if scope is not None:
        scope.failure = error
    return error


def _before_model_call(event: BeforeModelCallEvent) -> None:
    """Added once per agent: a failure Strands swallowed into a tool result stops the run here."""
    scope = _scope.get()
    if scope is not None and scope.failure is not None:
        raise scope.failure


def _before_tool_call(event: BeforeToolCallEvent) -> None:
    """Added once per agent, after its own hooks: journal the tool, cancel a declined call."""
    scope = _scope.get()
    if scope is None:
        return
    call_id = event.tool_use["toolUseId"]
    scope.tool_uses[call_id] = event.tool_use
    if call_id in scope.declined and not event.cancel_tool:
        reason = scope.declined[call_id]
        event.cancel_tool = f"{DECLINED} Reason: {reason}" if reason else DECLINED
    elif event.selected_tool is not None and not isinstance(event.selected_tool, _JournaledTool):
        event.selected_tool = _JournaledTool(event.selected_tool, scope.ctx)


# -- the adapter -----------------------------------------------------------------------------


@dataclass
class _Prepared:
    pristine: Snapshot
    locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = field(
        default_factory=weakref.WeakKeyDictionary
    )

    def lock(self) -> asyncio.Lock:
        """The running loop's lock (a lock belongs to one loop; tests and hosts may run several)."""
        return self.locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())


_prepared: weakref.WeakKeyDictionary[Agent, _Prepared] = weakref.WeakKeyDictionary()


def _prepare(agent: Agent) -> _Prepared:
    """Once per agent: the journaled model, the tool hook, and the agent's state before any run."""
    if agent not in _prepared:
        if not isinstance(agent.model, JournaledModel):
            agent.model = JournaledModel(agent.model)
        agent.hooks.add_callback(BeforeToolCallEvent, _before_tool_call)
        agent.hooks.add_callback(BeforeModelCallEvent, _before_model_call)
        _prepared[agent] = _Prepared(agent.take_snapshot(preset="session"))
    return _prepared[agent]


async def _answer(scope: _Scope, interrupt: Any) -> Any:
    """A Strands interrupt as an agent-unit interrupt; the response to resume Strands with."""
    for call_id, tool_use in scope.tool_uses.items():
        # Strands names the call in the id of an interrupt raised in its BeforeToolCallEvent
        # (``v1:before_tool_call:<toolUseId>:<uuid of the name>``): the approval of that call.
        if f":{call_id}:" in interrupt.id:
            arguments = tool_use.get("input")
            approval = await ask_approval(
                scope.ctx.run, call_id=call_id, tool=tool_use["name"], arguments=arguments, agent=scope.agent_name
            )
            if not approval.approved:
                scope.declined[call_id] = approval.reason or ""
            return approval.model_dump()
    # Another pause (a BeforeToolsEvent hook): Strands' id is the same for every cycle of the
    # loop, so the interrupt is keyed by its occurrence, which a replay reaches in the same order.
    return await scope.ctx.run.interrupt(interrupt.name, to_jsonable_python(interrupt.reason, fallback=str))


async def _invoke(agent: Agent, scope: _Scope, prompt: str) -> AgentResult:
    result = await agent.invoke_async(prompt)
    while result.stop_reason == "interrupt":
        responses = [
            {"interruptResponse": {"interruptId": each.id, "response": await _answer(scope, each)}}
            for each in result.interrupts or []
        ]
        result = await agent.invoke_async(responses)
    return result


def _agent_name(agent: Agent, ctx: AdapterContext) -> str:
    """The agent's own name; the name it is served under when it has none (Strands' default)."""
    return agent.name if agent.name and agent.name != _STRANDS_DEFAULT_NAME else ctx.run.agent


async def _run(agent: Agent, ctx: AdapterContext) -> Any:
    prompt = Prompt.model_validate(ctx.input).prompt
    prepared = _prepare(agent)

    async def read_history() -> Any:
        return await ctx.kv.get(HISTORY)

    saved = await ctx.durable.value(HISTORY, read_history)
    async with prepared.lock():  # Strands keeps one conversation per instance: runs take turns
        scope = _Scope(ctx, _agent_name(agent, ctx))
        token = _scope.set(scope)
        try:
            agent.load_snapshot(Snapshot.from_dict(saved) if saved else prepared.pristine)
            result = await _invoke(agent, scope, prompt)
            conversation = agent.take_snapshot(preset="session").to_dict()
        finally:
            agent.load_snapshot(prepared.pristine)
            _scope.reset(token)

    async def save_history() -> None:  # journaled: a replay of a finished run does not write it again
        await ctx.kv.set(HISTORY, to_jsonable_python(conversation, fallback=str))

    await ctx.durable.value(f"{HISTORY}:save", save_history)
    if isinstance(result.structured_output, BaseModel):
        return result.structured_output.model_dump(mode="json")
    return str(result).strip()


def _describe(agent: Agent) -> dict[str, Any]:
    return {"description": str(agent.description or ""), "input_type": Prompt}


adapter = define_adapter(
    name="strands",
    match=lambda value: isinstance(value, Agent),
    describe=_describe,
    run=_run,
)
