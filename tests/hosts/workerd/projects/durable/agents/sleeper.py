"""Sleeps two seconds; the run's Durable Object alarm wakes it."""

from __future__ import annotations

from ledger import record

from agent_unit import Run, define_agent


@define_agent
async def agent(input: str, run: Run) -> str:
    await run.sleep("2s")
    await run.step("woke", lambda: record("/woke", name=input))
    return f"rested {input}"
