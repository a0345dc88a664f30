"""Agents served over HTTP by the tests (imported by in-process apps and by uvicorn processes)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import BaseModel

from agent_unit import Run, define_agent


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


@define_agent(description="Emits many events, slowly.")
async def chatty(input: int, run: Run) -> int:
    for i in range(input):
        await run.step("tick", lambda i=i: i)
        await asyncio.sleep(0.01)
    return input


AGENTS = {"refund": refund, "chatty": chatty}
