"""Agents the Temporal tests run (imported by in-process apps, uvicorn processes and workers)."""

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


def ledger(line: str) -> None:
    """Append ``line`` to ``$LEDGER_FILE``: the effects a test counts, across processes."""
    path = os.environ.get("LEDGER_FILE")
    if path:
        with Path(path).open("a") as f:
            f.write(line + "\n")


@define_agent(description="Refunds an order after a human approves it.")
async def refund(input: RefundInput, run: Run) -> str:
    order = await run.step("load-order", lambda: {"id": input.order_id, "amount": 42})
    decision = await run.interrupt("approve-refund", order, answer=Approval)
    if not decision.approved:
        return "declined"
    await run.step("charge", lambda step: ledger(f"charge {input.order_id} {step.idempotency_key}"))
    return "refunded"


@define_agent(description="Three steps; the second is slow on the first attempt (a worker is killed inside it).")
async def slow(input: float, run: Run) -> str:
    async def step(name: str) -> str:
        ledger(f"start {name} {run.id} {os.getpid()}")
        if name == "two" and run.attempt == 1:
            await asyncio.sleep(input)
        ledger(f"end {name} {run.id} {os.getpid()}")
        return name

    done = [await run.step(name, lambda name=name: step(name)) for name in ("one", "two", "three")]
    return "+".join(done)


@define_agent(description="Sleeps, then writes one line.")
async def nap(input: float, run: Run) -> str:
    await run.step("before", lambda: ledger(f"before {run.id}"))
    await run.sleep(f"{input}s")
    await run.step("after", lambda: ledger(f"after {run.id}"))
    return "rested"


@define_agent(description="Waits for an answer it never gets (a run to cancel).")
async def waits(input: str, run: Run) -> str:
    await run.interrupt("never", input, answer=bool)
    return "answered"


AGENTS = {"refund": refund, "slow": slow, "nap": nap, "waits": waits}
