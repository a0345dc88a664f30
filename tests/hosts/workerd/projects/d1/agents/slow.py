"""A step that takes a moment, then one that calls the ledger: started with a 202, it finishes after the response."""

from __future__ import annotations

import asyncio

from ledger import record

from agent_unit import Run, define_agent


@define_agent
async def agent(input: str, run: Run) -> str:
    async def pause() -> str:
        await asyncio.sleep(1.5)
        return "paused"

    await run.step("pause", pause)
    await run.step("after", lambda: record("/after", name=input))
    return f"done {input}"
