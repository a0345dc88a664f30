"""Agents the serverless preset tests add to a copy of the refund example (as agent source files)."""

NAPPER = """
from agent_unit import Run, define_agent


@define_agent(description="Sleeps, then finishes.")
async def agent(input: str, run: Run) -> str:
    await run.sleep("1s")
    await run.step("wake", lambda: "awake")
    return f"rested {input}"
"""

LONG = """
import asyncio

from agent_unit import Run, define_agent


@define_agent(description="Many slow steps: longer than one invocation's budget.")
async def agent(input: int, run: Run) -> int:
    total = 0
    for i in range(input):

        async def work(i: int = i) -> int:
            await asyncio.sleep(0.3)
            return i

        total += await run.step("work", work)
    return total
"""
