"""The built-in adapter for Google's Agent Development Kit (``google-adk``, imported as ``google.adk``).

ADK's ``Runner`` drives its own loop and keeps the conversation in a session. The adapter
runs the user's agent, unchanged, through a ``Runner`` with one plugin added for the run:

- ``before_model_callback`` answers every model call (an ``LlmResponse`` returned there
  skips the model): the first time the agent's own model is called through
  ``ctx.durable.model``, streaming text and reasoning live, and the response is journaled
  with a hash of the request; a replay returns it without calling the model. Function
  calls the model gave no id get one before the response is journaled, so every replay
  sees the same ids.
- ``before_tool_callback`` answers every tool call (a dict returned there skips ADK's own
  call): the tool runs through ``ctx.durable.tools`` under ADK's function call id, which is
  its idempotency key; what it does to ``tool_context.actions`` (state changes, a transfer,
  an escalation) is journaled with it. A tool with ``require_confirmation`` pauses the run as the
  ``tool-approval`` interrupt; a declined call is not run, and the model gets ADK's own
  answer to a rejected confirmation.

The session: an ``InMemorySessionService`` per execution, seeded with the thread's events,
which live in agent-unit's thread state. ADK's database session services would be a second
store to configure and to keep in step with the journal; this way the thread's conversation
is in whatever store agent-unit uses, a replay rebuilds exactly the session it started
from (the history is a journaled read), and a second run on the thread continues it.

A tool that calls ``tool_context.request_confirmation(...)`` itself pauses as the same
interrupt; the tool is then called again with ADK's ``ToolConfirmation`` (confirmed or not),
journaled under ``<call id>:confirmed``, and decides itself what to tell the model.

Not journaled, so they run again on a replay: agent and model callbacks, and other plugins.
A tool's error reaches the run as the tool's own exception (ADK's ``on_tool_error_callback``
does not see it: the tool runs inside agent-unit's plugin). A ``LongRunningFunctionTool``
is one journaled call; its later result, which ADK takes as a new message, is not supported.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from google.adk.agents import BaseAgent, LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.apps import App
from google.adk.events import Event, EventActions
from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import BaseModel, TypeAdapter
from pydantic_core import to_jsonable_python

from .._parks import Park
from ..errors import AdapterError
from .api import AdapterContext, define_adapter
from .approval import ask_approval
from .messages import MessageStream
from .prompt import Prompt

__all__ = ["adapter"]

HISTORY = "google-adk:events"
"""The thread state key of the session's events so far."""

REJECTED = "This tool call is rejected."
"""What ADK answers the model for a call whose confirmation was declined (``tools/_confirmation_utils.py``)."""

ACTIONS = "adk_actions"
"""Marks a journaled tool result that carries what the tool did to its ``tool_context.actions``."""

_APP = "agent_unit"
_USER = "agent-unit"
_PLUGIN = "agent-unit"


def _plain(value: Any) -> Any:
    """JSON data, the same on every replay: pydantic models without unset fields, no object reprs."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    return to_jsonable_python(value, fallback=lambda other: getattr(other, "__qualname__", type(other).__qualname__))


def _request(llm_request: LlmRequest) -> dict[str, Any]:
    """What a model call asks: the model, the contents and the configuration (tools, schema, instructions)."""
    config = llm_request.config.model_dump(exclude_none=True) if llm_request.config is not None else {}
    return {"model": llm_request.model, "contents": _plain(llm_request.contents), "config": _plain(config)}


def _provider(model: BaseLlm) -> str:
    """Gemini is ``google``; LiteLLM's ``provider/model`` names give theirs; any other model, its class."""
    if type(model).__module__.startswith("google.adk.models.google_llm"):
        return "google"
    prefix, slash, _ = model.model.partition("/")
    return prefix if slash else type(model).__name__


def _usage(provider: str, model: str) -> Any:
    def usage(response: dict[str, Any]) -> dict[str, Any] | None:
        spent = response.get("usage_metadata") or {}
        if not spent:
            return None
        inputs, outputs = spent.get("prompt_token_count") or 0, spent.get("candidates_token_count") or 0
        entry: dict[str, Any] = {
            "provider": provider,
            "model": response.get("model_version") or model,
            "inputTokens": inputs,
            "outputTokens": outputs,
            "totalTokens": spent.get("total_token_count") or inputs + outputs,
        }
        if thoughts := spent.get("thoughts_token_count"):
            entry["reasoningTokens"] = thoughts
        if cached := spent.get("cached_content_token_count"):
            entry["cachedInputTokens"] = cached
        return entry

    return usage


class _Shown:
    """A response's text and reasoning parts as AG-UI messages: a new message each time the kind changes."""

    def __init__(self, ctx: AdapterContext) -> None:
        self._stream = MessageStream(ctx.stream)
        self._base = uuid.uuid4().hex
        self._count = 0
        self._thought: bool | None = None

    def parts(self, response: LlmResponse) -> list[types.Part]:
        shown = [part for part in (response.content.parts or [] if response.content else []) if part.text]
        for part in shown:
            thought = bool(part.thought)
            if thought != self._thought:
                self._stream.close()
                self._count += 1
                self._thought = thought
            message_id = f"{self._base}:{self._count}"
            if thought:
                self._stream.reasoning(message_id, part.text or "")
            else:
                self._stream.text(message_id, part.text or "")
        return shown

    def close(self) -> None:
        self._stream.close()


class _Durability(BasePlugin):
    """agent-unit's plugin, added to one run: journaled model and tool calls, confirmations as interrupts."""

    def __init__(self, agent: BaseAgent, ctx: AdapterContext) -> None:
        super().__init__(name=_PLUGIN)
        self._agent = agent
        self._ctx = ctx
        self._calls: set[asyncio.Event] = set()  # the tool calls running now, each set when it ends

    def _llm_agent(self, name: str) -> LlmAgent:
        found = self._agent.find_agent(name)
        if not isinstance(found, LlmAgent):
            raise AdapterError(f"agent {name!r} called a model but is not an LlmAgent of this agent's tree")
        return found

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        model = self._llm_agent(callback_context.agent_name).canonical_model
        name = llm_request.model or model.model
        ctx = self._ctx

        async def live(_: Any) -> dict[str, Any]:
            plain: dict[str, Any] = _plain(await self._stream(model, llm_request))
            return plain

        call = ctx.durable.model(live, name=name, usage=_usage(_provider(model), name))
        return LlmResponse.model_validate(await call(_request(llm_request)))

    async def _stream(self, model: BaseLlm, llm_request: LlmRequest) -> LlmResponse:
        """Call the model, its text and reasoning reaching the run's events as they arrive; the whole response."""
        show = _Shown(self._ctx)
        final: LlmResponse | None = None
        streamed: list[types.Part] = []
        async for response in model.generate_content_async(llm_request, stream=True):
            if response.partial:
                streamed.extend(show.parts(response))
            elif final is None or response.content:
                final = response
        if final is None:  # only partial chunks: the response is their text, joined
            final = LlmResponse(content=types.Content(role="model", parts=streamed))
        elif not streamed:  # not streamed: show it whole
            show.parts(final)
        show.close()
        for part in final.content.parts or [] if final.content else []:
            if part.function_call is not None and not part.function_call.id:
                # ADK would give it a new random id on every replay: one id, journaled, instead.
                part.function_call.id = f"adk-{uuid.uuid4()}"
        return final

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        done = asyncio.Event()
        self._calls.add(done)
        try:
            return await self._call(tool, tool_args, tool_context)
        except Park:
            # ADK cancels the other calls of a parallel batch when one raises: let them finish
            # first, so a pause never cuts a running tool short (it would run again on resume).
            self._calls.discard(done)
            await asyncio.gather(*(other.wait() for other in list(self._calls)))
            raise
        finally:
            self._calls.discard(done)
            done.set()

    async def _call(self, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext) -> dict[str, Any]:
        call_id = tool_context.function_call_id or ""
        agent = tool_context.agent_name
        if await tool.check_require_confirmation(tool_args, tool_context) is True:
            answer = await ask_approval(
                self._ctx.run, call_id=call_id, tool=tool.name, arguments=tool_args, agent=agent
            )
            if not answer.approved:  # ADK's answer to a declined confirmation
                return {"error": f"{REJECTED} Reason: {answer.reason}" if answer.reason else REJECTED}
            tool_context.tool_confirmation = ToolConfirmation(confirmed=True)
        result = await self._invoke(tool, tool_args, tool_context, call_id)
        asked = tool_context.actions.requested_tool_confirmations.pop(call_id, None)
        if asked is not None:
            # The tool called tool_context.request_confirmation(): ADK would end the invocation and
            # wait for the answer; the run parks instead, then calls the tool again with the answer.
            # Its tool events went out as it ran; the second call adds its own.
            answer = await ask_approval(
                self._ctx.run, call_id=call_id, tool=tool.name, arguments=tool_args, agent=agent, show=False
            )
            tool_context.tool_confirmation = asked.model_copy(update={"confirmed": answer.approved})
            result = await self._invoke(tool, tool_args, tool_context, f"{call_id}:confirmed")
        return result if isinstance(result, dict) else {"result": result}

    async def _invoke(self, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, key: str) -> Any:
        """The tool, journaled under ``key`` (its function call id), with what it did to ``tool_context.actions``.

        A tool talks to ADK through its actions too (state changes, a transfer, an escalation, a
        confirmation it asks for): they are journaled with its result and put back on replay.
        """

        async def invoke(**arguments: Any) -> Any:
            result = _plain(await tool.run_async(args=arguments, tool_context=tool_context))
            actions = tool_context.actions.model_dump(mode="json", exclude_defaults=True)
            return {ACTIONS: actions, "result": result} if actions else result

        result = await self._ctx.durable.tools({tool.name: invoke})[tool.name](tool_args, call_id=key)
        if not (isinstance(result, dict) and ACTIONS in result):
            return result
        done = EventActions.model_validate(result[ACTIONS])
        for field in done.model_fields_set:
            value = getattr(done, field)
            current = getattr(tool_context.actions, field)
            if isinstance(current, dict):  # the same dict: the tool context's state writes into it
                current.update(value)
            else:
                setattr(tool_context.actions, field, value)
        return result["result"]


_EVENTS: TypeAdapter[list[Event]] = TypeAdapter(list[Event])


def _output(agent: BaseAgent, events: list[Event]) -> Any:
    """The run's output: the agent's last final text, validated to its ``output_schema`` when it has one."""
    text = None
    for event in events:
        if event.is_final_response() and event.content and event.content.parts:
            parts = [part.text for part in event.content.parts if part.text and not part.thought]
            if parts:
                text = "".join(parts)
    schema = getattr(agent, "output_schema", None)
    if text is not None and isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_validate_json(text).model_dump(mode="json")
    if text is not None and schema is not None:
        return json.loads(text)
    return text


async def _run(agent: BaseAgent, ctx: AdapterContext) -> Any:
    prompt = Prompt.model_validate(ctx.input).prompt

    async def read_history() -> Any:
        return await ctx.kv.get(HISTORY)

    history = _EVENTS.validate_python(await ctx.durable.value(HISTORY, read_history) or [])
    sessions = InMemorySessionService()
    session = await sessions.create_session(app_name=_APP, user_id=_USER, session_id=ctx.run.thread_id)
    for event in history:
        await sessions.append_event(session, event)
    app = App(name=_APP, root_agent=agent, plugins=[_Durability(agent, ctx)])
    runner = Runner(app=app, session_service=sessions)
    new: list[Event] = []
    try:
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        async for event in runner.run_async(user_id=_USER, session_id=session.id, new_message=message):
            new.append(event)
    except RuntimeError as exc:  # ADK wraps what a plugin raises: the journal's own errors, a tool's error
        cause = exc.__cause__
        if cause is not None and str(exc).startswith(f"Error in plugin {_PLUGIN!r}"):
            raise cause from None
        raise
    except BaseExceptionGroup as group:  # a pause inside parallel tool calls: unwind with the pause itself
        parked = group.subgroup(lambda exc: isinstance(exc, Park))
        if parked is None:
            raise
        raise _first(parked) from None
    finally:
        await runner.close()
    done = await sessions.get_session(app_name=_APP, user_id=_USER, session_id=session.id)
    events = _EVENTS.dump_python(done.events if done is not None else [*history, *new], mode="json", exclude_none=True)

    async def save_history() -> None:  # journaled: a replay of a finished run does not write it again
        await ctx.kv.set(HISTORY, events)

    await ctx.durable.value(f"{HISTORY}:save", save_history)
    return _output(agent, new)


def _first(group: BaseExceptionGroup[Any]) -> BaseException:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


def _describe(agent: BaseAgent) -> dict[str, Any]:
    return {"description": agent.description or "", "input_type": Prompt}


adapter = define_adapter(
    name="google-adk",
    match=lambda value: isinstance(value, BaseAgent),
    describe=_describe,
    run=_run,
)
