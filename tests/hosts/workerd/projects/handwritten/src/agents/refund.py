from pydantic import BaseModel

from agent_unit import Run, define_agent


class Approval(BaseModel):
    approved: bool


@define_agent(description="Refunds an order after a human approves it.")
async def agent(input: dict, run: Run) -> str:
    order = await run.step("load-order", lambda: {"id": input["order_id"]})
    decision = await run.interrupt("approve-refund", order, answer=Approval)
    return "refunded" if decision.approved else "declined"
