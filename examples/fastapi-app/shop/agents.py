"""The shop's one agent: a refund that waits for a person to approve it in the inbox."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent_unit import Run, define_agent

from . import ledger


class RefundRequest(BaseModel):
    order_id: str
    amount_cents: int = Field(gt=0)


class Decision(BaseModel):
    approved: bool
    note: str = ""


@define_agent(description="Refunds an order once a person approves it in the inbox.")
async def refund(input: RefundRequest, run: Run) -> str:
    decision = await run.interrupt("approve-refund", input.model_dump(), answer=Decision)
    if not decision.approved:
        return f"declined: {decision.note}" if decision.note else "declined"
    payout = await run.step(
        "pay",
        lambda step: ledger.pay(input.order_id, input.amount_cents, idempotency_key=step.idempotency_key),
    )
    return f"refunded {input.amount_cents / 100:.2f} as {payout}"


AGENTS = {"refund": refund}
