"""The Echo framework and its agent-unit adapter."""

from __future__ import annotations

from typing import Any

from agent_unit.adapters import AdapterContext, define_adapter


class Echo:
    """An agent of the Echo framework: it "calls a model" (here, formats text) and may use a tool."""

    def __init__(self, prefix: str = "", *, shout: bool = False) -> None:
        self.prefix = prefix
        self.shout = shout


async def _run(agent: Echo, ctx: AdapterContext) -> str:
    async def model(request: dict[str, Any]) -> dict[str, Any]:
        text = f"{agent.prefix}{request['text']}"
        return {"text": text.upper() if agent.shout else text, "usage": {"provider": "echo", "model": "echo-1"}}

    call = ctx.durable.model(model, name="echo", usage=lambda response: response["usage"])
    response = await call({"text": str(ctx.input)})
    return str(response["text"])


adapter = define_adapter(
    name="echo",
    match=lambda value: isinstance(value, Echo),
    describe=lambda agent: {"description": f"Echo agent ({agent.prefix!r})", "input_schema": {"type": "string"}},
    run=_run,
)
