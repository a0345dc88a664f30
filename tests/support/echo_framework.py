"""A tiny framework of our own, and its agent-unit adapter, for the adapter API's tests."""

from __future__ import annotations

from typing import Any

from agent_unit.adapters import AdapterContext, define_adapter


class EchoAgent:
    """The framework: an agent that answers with a prefix, and can ask for approval first."""

    def __init__(self, prefix: str, *, approve: bool = False, effects: list[str] | None = None) -> None:
        self.prefix = prefix
        self.approve = approve
        self.effects = effects if effects is not None else []


async def _run(agent: EchoAgent, ctx: AdapterContext) -> str:
    if agent.approve:
        answer = await ctx.run.interrupt("approve-echo", {"text": ctx.input}, answer=bool)
        if not answer:
            return "declined"

    def say() -> str:
        agent.effects.append(str(ctx.input))
        return f"{agent.prefix}{ctx.input}"

    await ctx.emit("echo", {"input": ctx.input})
    return await ctx.run.step("echo", say)


echo_adapter = define_adapter(
    name="echo",
    match=lambda value: isinstance(value, EchoAgent),
    describe=lambda agent: {"description": f"Echoes with {agent.prefix!r}.", "input_schema": {"type": "string"}},
    run=_run,
)


def make_adapter() -> Any:
    """What a package's entry point names: a function returning the adapter."""
    return echo_adapter


not_an_adapter = object()


class ChatAgent:
    """A second tiny framework: a model that may call tools, one approval, a conversation loop."""

    def __init__(self, model: Any, tools: dict[str, Any], *, approve: tuple[str, ...] = ()) -> None:
        self.model = model
        self.tools = tools
        self.approve = approve


async def _chat(agent: ChatAgent, ctx: AdapterContext) -> str:
    model = ctx.durable.model(agent.model, name="chat", usage=lambda response: response.get("usage"))
    tools = ctx.durable.tools(agent.tools)
    messages: list[dict[str, Any]] = [{"role": "user", "content": ctx.input}]
    while True:
        response = await model({"messages": messages})
        messages.append(response["message"])
        call = response.get("tool_call")
        if call is None:
            return str(response["message"]["content"])
        if call["name"] in agent.approve:
            approved = await ctx.run.interrupt(
                "tool-approval",
                {"call_id": call["id"], "tool": call["name"], "arguments": call["arguments"]},
                answer=bool,
            )
            if not approved:
                messages.append({"role": "tool", "content": "declined by a human"})
                continue
        result = await tools[call["name"]](call["arguments"], call_id=call["id"])
        messages.append({"role": "tool", "content": result})


chat_adapter = define_adapter(
    name="chat",
    match=lambda value: isinstance(value, ChatAgent),
    describe=lambda agent: {"description": "A chat agent with tools."},
    run=_chat,
)
