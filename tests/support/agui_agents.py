"""Agents the AG-UI route's tests serve (imported by in-process apps and by uvicorn processes)."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_unit import Run, define_agent
from agent_unit.adapters import AdapterContext, define_adapter

from .http_agents import Approval, RefundInput, refund

__all__ = ["AGENTS", "Approval", "RefundInput", "refund"]  # the refund agent is the REST tests' own


class Greeter:
    """A tiny framework whose model answers with a greeting, streamed as AG-UI text.

    With ``ask``, it asks whether to greet once more, and does so on ``true``.
    """

    def __init__(self, *, ask: bool = False) -> None:
        self.ask = ask


USAGE = {"provider": "test", "model": "greeter", "inputTokens": 3, "outputTokens": 5, "totalTokens": 8}


async def _greet(agent: Greeter, ctx: AdapterContext) -> str:
    async def model(request: dict[str, Any]) -> dict[str, Any]:
        text = f"Hello, {request['prompt']}!" if request["turn"] == 0 else f"Hello again, {request['prompt']}!"
        message_id = f"msg_{ctx.run.id}_{request['turn']}"
        ctx.stream({"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"})
        for word in text.split(" "):
            ctx.stream({"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": word + " "})
        ctx.stream({"type": "TEXT_MESSAGE_END", "messageId": message_id})
        return {"text": text, "usage": USAGE}

    say = ctx.durable.model(model, name="greet", usage=lambda response: response["usage"])
    first = await say({"prompt": ctx.input, "turn": 0})
    if not agent.ask or not await ctx.run.interrupt("greet-again", f"Greet {ctx.input} once more?", answer=bool):
        return str(first["text"])
    second = await say({"prompt": ctx.input, "turn": 1})
    return str(second["text"])


greeter = define_adapter(
    name="greeter",
    match=lambda value: isinstance(value, Greeter),
    describe=lambda agent: {"description": "Greets whoever writes.", "input_type": str},
    run=_greet,
)


@define_agent(description="Sleeps for an hour.")
async def nap(input: str, run: Run) -> str:
    await run.sleep("1h")
    return "rested"


@define_agent(description="Runs two steps of one name side by side.")
async def fanout(input: int, run: Run) -> list[int]:
    async def fetch(value: int) -> int:
        await asyncio.sleep(0.01)  # both steps are open at once (a quick sync function would return first)
        return value

    return list(
        await asyncio.gather(run.step("fetch", lambda: fetch(input)), run.step("fetch", lambda: fetch(input + 1)))
    )


@define_agent(description="Fails.")
async def broken(input: str, run: Run) -> str:
    await run.step("try", lambda: None)
    raise ValueError(f"cannot {input}")


AGENTS = {
    "refund": refund,
    "greet": greeter.adapt(Greeter()),
    "greet-twice": greeter.adapt(Greeter(ask=True)),
    "nap": nap,
    "fanout": fanout,
    "broken": broken,
}
