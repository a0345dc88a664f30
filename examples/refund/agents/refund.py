"""Refunds an order after a human approves it."""

from __future__ import annotations

from payments import load_order, refund
from pydantic import BaseModel

from agent_unit import Run, define_agent


class RefundInput(BaseModel):
    order_id: str


class Approval(BaseModel):
    approved: bool
    note: str = ""


@define_agent(description="Refunds an order after a human approves it.")
async def agent(input: RefundInput, run: Run) -> str:
    order = await run.step("load-order", lambda: load_order(input.order_id))
    decision = await run.interrupt("approve-refund", order, answer=Approval)
    if not decision.approved:
        return "declined"
    await run.step("charge", lambda step: refund(order, idempotency_key=step.idempotency_key))
    return "refunded"
