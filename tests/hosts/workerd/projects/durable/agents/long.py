"""Four steps of 1.2 s each: past the 3 s budget, the run yields and its alarm continues it."""

from __future__ import annotations

import asyncio

from ledger import record

from agent_unit import Run, define_agent


@define_agent
async def agent(input: str, run: Run) -> int:
    for index in range(4):

        async def work(index: int = index) -> int:
            await asyncio.sleep(1.2)
            await record("/long", name=input, index=index)
            return index

        await run.step(f"part-{index}", work)
    return 4
