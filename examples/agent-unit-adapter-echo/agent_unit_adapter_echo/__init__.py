"""The Echo framework and its agent-unit adapter.

The adapter uses only agent-unit's public adapter API: ``ctx.durable.model`` journals the
"model call" by its result, ``ctx.durable.tools`` journals each tool call (with its AG-UI tool
events and a stable idempotency key), so after a crash or a pause neither runs again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent_unit.adapters import AdapterContext, define_adapter


class Echo:
    """An agent of the Echo framework: it "calls a model" (here, formats text), then hands the
    answer to each of its tools (``tool(text=...)``, in name order) and returns the answer."""

    def __init__(
        self, prefix: str = "", *, shout: bool = False, tools: Mapping[str, Callable[..., Any]] | None = None
    ) -> None:
        self.prefix = prefix
        self.shout = shout
        self.tools = dict(tools or {})


async def _run(agent: Echo, ctx: AdapterContext) -> str:
    async def model(request: dict[str, Any]) -> dict[str, Any]:
        text = f"{agent.prefix}{request['text']}"
        return {"text": text.upper() if agent.shout else text, "usage": {"provider": "echo", "model": "echo-1"}}

    call = ctx.durable.model(model, name="echo", usage=lambda response: response["usage"])
    response = await call({"text": str(ctx.input)})
    text = str(response["text"])
    tools = ctx.durable.tools(agent.tools)
    for name in sorted(tools):
        await tools[name]({"text": text})
    return text


adapter = define_adapter(
    name="echo",
    match=lambda value: isinstance(value, Echo),
    describe=lambda agent: {"description": f"Echo agent ({agent.prefix!r})", "input_schema": {"type": "string"}},
    run=_run,
)
