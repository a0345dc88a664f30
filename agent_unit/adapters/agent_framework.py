"""The built-in adapter for the Microsoft Agent Framework (``agent-framework-core``, imported as ``agent_framework``).

``Agent.run`` drives its own loop (call the chat client, invoke functions, call it again) and
cannot resume in the middle of it. So the adapter makes the loop replayable, adding two
middlewares to each run (the user's agent is not changed):

- a ``ChatMiddleware`` journals every chat client call by its response (``ChatResponse.to_dict``)
  with a hash of what was asked; a replay sets the journaled response as the middleware's
  result and calls nothing;
- a ``FunctionMiddleware`` journals every function call under the framework's ``call_id``, so
  ``use_run().idempotency_key()`` inside the tool is stable when a crash makes it run again.

A tool declared ``@tool(approval_mode="always_require")`` makes ``Agent.run`` return
``user_input_requests``; each becomes the shared ``tool-approval`` interrupt, and the answer
goes back to the agent as ``to_function_approval_response(approved)``: a declined call is not
run and the framework tells the model it was rejected (the framework has no place for a
reason, so a declining reason is not passed on).

The conversation continues on the run's thread: the ``AgentSession`` (its history) is kept in
thread state. The adapter runs the agent without streaming, but asks the chat client to stream
each call the first time, so text and reasoning reach the event stream as they arrive; the
call is journaled whole. A function's result is journaled as text, as the framework's
``Content`` items, or (``result_parser=SKIP_PARSING``) as its JSON form.

Not journaled, so they run again on a replay: agent middleware and context providers other
than the session's history. Hosted tools run by the provider are part of the journaled
response. Other user input requests (OAuth consent, computer use) do not pause the run: it
ends with the agent's response, as ``Agent.run`` returns it.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import agent_framework as af
from pydantic_core import to_jsonable_python

from .api import AdapterContext, define_adapter
from .approval import ask_approval
from .messages import MessageStream
from .prompt import Prompt

__all__ = ["adapter"]

SESSION = "agent-framework:session"
"""The thread state key of the ``AgentSession`` so far (``to_dict``)."""

_VOLATILE = frozenset({"id", "_attribution", "created_at", "message_id", "response_id"})
"""Fields that differ between a run and its replay without changing what is asked (the framework
gives each approval and call occurrence a random id)."""


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _strip(item) for key, item in value.items() if key not in _VOLATILE}
    if isinstance(value, list):
        return [_strip(item) for item in value]
    return value


def _tool_names(options: Any) -> list[str]:
    tools = options.get("tools") if isinstance(options, dict) else None
    return sorted(str(getattr(tool, "name", type(tool).__name__)) for tool in tools or [])


def _fingerprint(context: af.ChatContext) -> dict[str, Any]:
    """What a chat call asks, in a form that is the same on every replay."""
    options = dict(context.options or {})
    settings = {key: value for key, value in options.items() if key not in {"tools", "response_format"}}
    response_format = options.get("response_format")
    return {
        "messages": _strip([message.to_dict() for message in context.messages]),
        "tools": _tool_names(options),
        "options": to_jsonable_python(settings, fallback=lambda other: type(other).__qualname__),
        "response_format": getattr(response_format, "__name__", None) if response_format is not None else None,
    }


def _model_name(client: Any, options: Any) -> str:
    for name in (options.get("model") if isinstance(options, dict) else None, getattr(client, "model", None)):
        if isinstance(name, str) and name:
            return name
    return type(client).__name__


def _usage(provider: str, requested: str) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    def usage(response: dict[str, Any]) -> dict[str, Any] | None:
        details = response.get("usage_details") or {}
        if not details:
            return None
        spent: dict[str, Any] = {
            "provider": provider,
            "model": response.get("model") or requested,
            "inputTokens": details.get("input_token_count") or 0,
            "outputTokens": details.get("output_token_count") or 0,
            "totalTokens": details.get("total_token_count")
            or (details.get("input_token_count") or 0) + (details.get("output_token_count") or 0),
        }
        if reasoning := details.get("reasoning_output_token_count"):
            spent["reasoningTokens"] = reasoning
        if cached := details.get("cache_read_input_token_count"):
            spent["cachedInputTokens"] = cached
        return spent

    return usage


def _forward(stream: MessageStream, prefix: str, update: af.ChatResponseUpdate | af.Message) -> None:
    """An update's (or a whole message's) text and reasoning as AG-UI deltas."""
    message = f"{prefix}:{update.message_id or 0}"
    for content in update.contents:
        if content.type == "text":
            stream.text(f"{message}:text", content.text or "")
        elif content.type == "text_reasoning":
            stream.reasoning(f"{message}:reasoning", content.text or "")


class JournaledChat(af.ChatMiddleware):
    """Each chat client call runs once; a replay answers it from the journal."""

    def __init__(self, ctx: AdapterContext) -> None:
        self._ctx = ctx

    async def process(self, context: af.ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        name = _model_name(context.client, context.options)
        provider = str(getattr(context.client, "OTEL_PROVIDER_NAME", "unknown"))
        prefix = uuid.uuid4().hex

        async def live(_request: Any) -> dict[str, Any]:
            # Streamed, so text and reasoning reach the run's events as they arrive; journaled whole.
            stream, streamed = MessageStream(self._ctx.stream), False
            context.stream = True
            try:
                await call_next()
                result = context.result
                if isinstance(result, af.ResponseStream):
                    async for update in result:
                        streamed = True
                        _forward(stream, prefix, update)
                    result = await result.get_final_response()
            except NotImplementedError:
                if streamed:  # the stream broke midway: a real failure, not a client that cannot stream
                    raise
                context.stream = False
                await call_next()  # a client that cannot stream: ask once, show the response whole
                result = context.result
            finally:
                context.stream = False
            if not isinstance(result, af.ChatResponse):
                raise TypeError(f"the chat client returned {type(result).__name__}, not a ChatResponse")
            if not streamed:
                for message in result.messages:
                    _forward(stream, prefix, message)
            stream.close()
            return result.to_dict()

        journaled = await self._ctx.durable.model(live, name=name, usage=_usage(provider, name))(_fingerprint(context))
        context.result = af.ChatResponse.from_dict(journaled)


def _result_json(result: Any) -> Any:
    """A function's result as JSON: text as a string (what the event stream shows), other items by ``to_dict``."""
    items = [result] if isinstance(result, af.Content) else result
    if isinstance(items, list) and all(isinstance(item, af.Content) for item in items):
        if all(item.type == "text" for item in items):
            return "".join(item.text or "" for item in items)
        return {"contents": [item.to_dict() for item in items]}
    return to_jsonable_python(result, fallback=str)


def _result_value(journaled: Any) -> Any:
    """The journaled result as the framework takes it back (a string or ``Content`` items pass intact)."""
    if isinstance(journaled, dict) and isinstance(journaled.get("contents"), list):
        return [af.Content.from_dict(item) for item in journaled["contents"]]
    return journaled


class JournaledFunctions(af.FunctionMiddleware):
    """Each function call runs once under the framework's call id; a replay returns its result."""

    def __init__(self, ctx: AdapterContext) -> None:
        self._ctx = ctx

    async def process(self, context: af.FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]) -> None:
        name = context.function.name
        arguments = context.arguments
        plain = arguments.model_dump(mode="json") if hasattr(arguments, "model_dump") else dict(arguments)
        call_id = context.metadata.get("call_id")

        async def invoke(**_arguments: Any) -> Any:
            await call_next()
            return _result_json(context.result)

        tool = self._ctx.durable.tools({name: invoke})[name]
        journaled = await tool(plain, call_id=str(call_id) if call_id else None)
        context.result = _result_value(journaled)


async def _run(agent: af.Agent, ctx: AdapterContext) -> Any:
    prompt = Prompt.model_validate(ctx.input).prompt

    async def read_session() -> Any:
        return await ctx.kv.get(SESSION)

    saved = await ctx.durable.value(SESSION, read_session)
    session = af.AgentSession.from_dict(saved) if saved else agent.create_session(session_id=ctx.run.thread_id)
    middleware: list[af.ChatMiddleware | af.FunctionMiddleware] = [JournaledChat(ctx), JournaledFunctions(ctx)]
    agent_name = agent.name or ctx.run.agent
    messages: Any = prompt
    while True:
        response = await agent.run(messages, session=session, middleware=middleware)
        requests = [item for item in response.user_input_requests if item.type == "function_approval_request"]
        if not requests:
            break
        answers = []
        for request in requests:
            call = request.function_call
            assert call is not None  # an approval request always names its call
            approval = await ask_approval(
                ctx.run,
                call_id=str(call.call_id),
                tool=str(call.name),
                arguments=call.parse_arguments() or {},
                agent=agent_name,
            )
            answers.append(request.to_function_approval_response(approval.approved))
        messages = af.Message(role="user", contents=answers)
    state = session.to_dict()

    async def save_session() -> None:  # journaled: a replay of a finished run does not write it again
        await ctx.kv.set(SESSION, state)

    await ctx.durable.value(f"{SESSION}:save", save_session)
    value = response.value
    return to_jsonable_python(value) if value is not None else response.text


def _describe(agent: af.Agent) -> dict[str, Any]:
    text = agent.description or ""
    line = text.strip().split("\n", 1)[0] if text else ""
    return {"description": line if len(line) <= 200 else line[:199] + "…", "input_type": Prompt}


adapter = define_adapter(
    name="agent-framework",
    match=lambda value: isinstance(value, af.Agent),
    describe=_describe,
    run=_run,
)
