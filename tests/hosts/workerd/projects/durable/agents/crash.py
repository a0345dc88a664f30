"""A charge, then a step that takes three seconds: the tests kill workerd during it."""

from __future__ import annotations

import asyncio

from ledger import record

from agent_unit import Run, StepContext, define_agent


@define_agent
async def agent(input: str, run: Run) -> str:
    async def charge(step: StepContext) -> str:
        await record("/crash-charge", name=input, idempotency_key=step.idempotency_key)
        return "charged"

    async def slow() -> str:
        await record("/crash-slow", name=input)
        await asyncio.sleep(3)
        return "slow"

    await run.step("charge", charge)
    await run.step("slow", slow)
    return "done"
