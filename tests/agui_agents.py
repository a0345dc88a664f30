"""Agents the AG-UI route's tests serve (imported by in-process apps and by uvicorn processes)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agent_unit import Run, define_agent
from agent_unit.adapters import AdapterContext, define_adapter


class RefundInput(BaseModel):
    order_id: str


class Approval(BaseModel):
    approved: bool


def charge(order_id: str, key: str) -> str:
    ledger = os.environ.get("LEDGER_FILE")
    if ledger:
        with Path(ledger).open("a") as f:
            f.write(f"charge {order_id} {key}\n")
    return f"re_{key[:8]}"


@define_agent(description="Refunds an order after a human approves it.")
async def refund(input: RefundInput, run: Run) -> str:
    order = await run.step("load-order", lambda: {"id": input.order_id, "amount": 42})
    decision = await run.interrupt("approve-refund", order, answer=Approval)
    if not decision.approved:
        return "declined"
    await run.step("charge", lambda step: charge(input.order_id, step.idempotency_key))
    return "refunded"


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
    return list(await asyncio.gather(run.step("fetch", lambda: input), run.step("fetch", lambda: input + 1)))


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
