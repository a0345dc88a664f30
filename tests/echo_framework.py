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
