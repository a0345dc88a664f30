"""The refund flow: load the order, park for a human, charge once with the step's idempotency key."""

from __future__ import annotations

from ledger import record
from pydantic import BaseModel

from agent_unit import Run, StepContext, define_agent


class RefundInput(BaseModel):
    order_id: str


class Approval(BaseModel):
    approved: bool


@define_agent(description="Refunds an order after a human approves it.")
async def agent(input: RefundInput, run: Run) -> str:
    order = await run.step("load-order", lambda: {"id": input.order_id, "amount_cents": 4200})
    decision = await run.interrupt("approve-refund", order, answer=Approval)
    if not decision.approved:
        return "declined"

    async def charge(step: StepContext) -> str:
        await record("/charge", order_id=order["id"], idempotency_key=step.idempotency_key)
        return f"re_{step.idempotency_key[:12]}"

    await run.step("charge", charge)
    return "refunded"
