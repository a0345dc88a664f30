"""Plain Python: load the order (a step), ask a person, refund it (a step)."""

from __future__ import annotations

from effects import record
from pydantic import BaseModel

from agent_unit import Run, define_agent


class Approval(BaseModel):
    approved: bool


@define_agent(description="Refunds an order once a person approves it (plain Python).")
async def agent(input: str, run: Run) -> str:
    def load() -> dict[str, str]:
        record(f"load {input}")
        return {"order_id": input}

    order = await run.step("load-order", load)
    decision = await run.interrupt("approve-refund", order, answer=Approval)
    if not decision.approved:
        return "declined"

    def refund() -> str:
        record(f"refund {input} {run.idempotency_key()}")
        return f"refunded {input}"

    return await run.step("refund", refund)
