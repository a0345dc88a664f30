"""Agents the telemetry tests run in processes of their own."""

from __future__ import annotations

from agent_unit import Run, define_agent


@define_agent
async def steps(input: None, run: Run) -> str:
    await run.step("one", lambda: 1)
    await run.step("two", lambda: 2)
    return "done"


AGENTS = {"steps": steps}
