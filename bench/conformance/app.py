"""The server the conformance suites run against: an echo agent (the default A2A agent) and an approval agent.

Served by ``bench/conformance/run.sh`` with uvicorn on ``$PORT``; the store is in memory, so
every run of the suites starts from no tasks.
"""

from __future__ import annotations

import os

from pydantic import BaseModel

from agent_unit import Run, create_agent_unit, define_agent


class RefundInput(BaseModel):
    order_id: str


class Approval(BaseModel):
    approved: bool


@define_agent(description="Echoes a text back.")
async def echo(input: str) -> str:
    return f"echo: {input}"


@define_agent(description="Refunds an order after a human approves it.")
async def refund(input: RefundInput, run: Run) -> dict[str, object]:
    decision = await run.interrupt("approve-refund", {"order_id": input.order_id}, answer=Approval)
    return {"order_id": input.order_id, "status": "refunded" if decision.approved else "declined"}


app = create_agent_unit(
    {"echo": echo, "refund": refund},
    store="memory://",
    public_url=f"http://localhost:{os.environ.get('PORT', '8790')}",
    a2a_default_agent="echo",  # a generic A2A client names no skill
)
