"""Agents served over MCP by the tests (imported in-process and by uvicorn processes)."""

from __future__ import annotations

from pydantic import BaseModel

from agent_unit import Run, define_agent


class EchoInput(BaseModel):
    text: str
    times: int = 1


class Echo(BaseModel):
    echoed: str
    length: int


class RefundInput(BaseModel):
    order_id: str


class Approval(BaseModel):
    approved: bool
    note: str | None = None


@define_agent(description="Repeats a text.")
async def echo(input: EchoInput) -> Echo:
    echoed = " ".join([input.text] * input.times)
    return Echo(echoed=echoed, length=len(echoed))


@define_agent(description="Refunds an order after a human approves it.")
async def refund(input: RefundInput, run: Run) -> str:
    order = await run.step("load-order", lambda: {"id": input.order_id, "amount": 42})
    decision = await run.interrupt("approve-refund", order, answer=Approval)
    return "refunded" if decision.approved else f"declined: {decision.note or 'no reason'}"


@define_agent(description="Doubles a number.")
async def double(input: int) -> int:
    return input * 2


@define_agent(description="Counts the orders of a batch.")
async def batch(input: list[RefundInput]) -> int:
    return len(input)


@define_agent(description="Answers pong; takes no input.")
async def ping(input: str | None) -> str:
    return f"pong {input}" if input else "pong"


@define_agent(description="Sleeps for an hour, then says so.")
async def nap(input: dict[str, str], run: Run) -> str:
    await run.sleep("1h")
    return "rested"


@define_agent(description="Always fails.")
async def broken(input: dict[str, str]) -> str:
    raise ValueError("the ledger is closed")


AGENTS = {
    "echo": echo,
    "refund": refund,
    "double": double,
    "batch": batch,
    "ping": ping,
    "nap": nap,
    "broken": broken,
}
