"""Agents served over A2A by the tests (imported by in-process apps and by uvicorn processes)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agent_unit import Run, define_agent


class RefundInput(BaseModel):
    order_id: str


class Approval(BaseModel):
    approved: bool


@define_agent(description="Echoes a text back.")
async def echo(input: str, run: Run) -> str:
    shouted = await run.step("shout", lambda: input.upper())
    await run.emit("echoed", shouted)
    return f"echo: {shouted}"


@define_agent(description="Refunds an order after a human approves it.")
async def refund(input: RefundInput, run: Run) -> dict[str, object]:
    order = await run.step("load-order", lambda: {"id": input.order_id, "amount": 42})
    decision = await run.interrupt("approve-refund", order, answer=Approval)
    status = await run.step("charge", lambda: "refunded" if decision.approved else "declined")
    return {"order_id": input.order_id, "status": status}


@define_agent(description="Adds one to a number.")
async def count(input: int) -> int:
    return input + 1


@define_agent(description="Always fails.")
async def broken(input: str) -> str:
    raise RuntimeError(f"cannot handle {input!r}")


@define_agent(description="Sleeps for an hour, then says so.")
async def nap(input: str, run: Run) -> str:
    await run.sleep("1h")
    return "rested"


class Note(BaseModel):
    """What a message with text and data parts together becomes."""

    text: str
    data: list[Any]


@define_agent(description="Says what a message of text and data parts held.")
async def note(input: Note) -> dict[str, Any]:
    return {"text": input.text, "data": input.data}


@define_agent(description="Reads the messages sent to it while it works, until one says stop.")
async def listener(input: str, run: Run) -> list[Any]:
    heard: list[Any] = []
    while "stop" not in heard:
        heard += await run.messages()
        if "stop" not in heard:
            await run.sleep(0.2)  # working (sleeping) between reads: a message lands while it is parked too
    return heard


AGENTS = {
    "echo": echo,
    "refund": refund,
    "count": count,
    "broken": broken,
    "nap": nap,
    "note": note,
    "listener": listener,
}
