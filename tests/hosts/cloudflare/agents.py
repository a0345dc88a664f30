"""Agents the Cloudflare tests run in the Workers simulation; ``calls`` counts each side effect."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from agent_unit import Run, define_agent
from agent_unit.env import env

calls: Counter[str] = Counter()
gate = asyncio.Event()
"""The ``stuck`` agent's step waits on this the first time it runs (an isolate dies meanwhile)."""


class RefundInput(BaseModel):
    order_id: str


class Approval(BaseModel):
    approved: bool


def charge(order: dict[str, Any], key: str) -> str:
    calls[f"charge {order['id']}"] += 1
    return f"ch_{key[-6:]}"


@define_agent(description="Refunds an order after a human approves it.")
async def refund(input: RefundInput, run: Run) -> str:
    order = await run.step("load-order", lambda: {"id": input.order_id, "amount": 42})
    decision = await run.interrupt("approve-refund", order, answer=Approval)
    if not decision.approved:
        return "declined"
    await run.step("charge", lambda step: charge(order, step.idempotency_key))
    return "refunded"


@define_agent(description="Sleeps an hour, then finishes.")
async def napper(input: str, run: Run) -> str:
    await run.step("before", lambda: calls.update(["before nap"]))
    await run.sleep("1h")
    await run.step("after", lambda: calls.update(["after nap"]))
    return f"rested {input}"


async def _slow() -> str:
    calls["slow"] += 1
    if calls["slow"] == 1:
        await gate.wait()  # the isolate running it dies here
    return "done"


@define_agent(description="A step the first isolate never finishes.")
async def stuck(input: str, run: Run) -> str:
    await run.step("first", lambda: calls.update(["first"]))
    await run.step("slow", _slow)
    return "finished"


@define_agent(description="Many steps: more than one alarm's budget.")
async def long(input: int, run: Run) -> int:
    total = 0
    for i in range(input):
        total += await run.step("work", lambda i=i: i)
    return total


async def _dawdle() -> str:
    await asyncio.sleep(0.2)
    calls["dawdled"] += 1
    return "dawdled"


@define_agent(description="A step that waits a moment: a run started with a 202 goes on after the response.")
async def dawdler(input: str, run: Run) -> str:
    return await run.step("dawdle", _dawdle)


@define_agent(description="Sleeps an hour, then reads a secret.")
async def keeper(input: str, run: Run) -> str:
    await run.sleep("1h")
    return await run.step("read", lambda: env["AGENT_UNIT_SECRET"])


@define_agent
async def approver(input: str, run: Run) -> str:
    approved = await run.interrupt("approve", {"for": input}, answer=bool, timeout="2d", default=False)
    return f"{input}: {'approved' if approved else 'nobody answered'}"


AGENTS = {
    "refund": refund,
    "napper": napper,
    "stuck": stuck,
    "long": long,
    "dawdler": dawdler,
    "keeper": keeper,
    "approver": approver,
}


async def digest(name: str, scheduled_at: datetime) -> None:
    """A scheduled task's handler."""
    calls[f"task {name} {scheduled_at.isoformat()}"] += 1


def sync_digest(name: str, scheduled_at: datetime) -> None:
    """A scheduled task's handler written as a plain ``def`` (a worker thread on CPython, inline in Pyodide)."""
    calls[f"sync task {name} {scheduled_at.isoformat()}"] += 1
