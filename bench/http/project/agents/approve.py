"""One journaled step, then an interrupt; answered with ``true`` it returns.

The agent-unit side of the HTTP benchmark's "runs to a pause" and "resumes" workloads
(the LangGraph graph in ``bench/http/langgraph_project/graphs.py`` does the same).
"""

from __future__ import annotations

from typing import Any

from agent_unit import Run, define_agent


async def work() -> int:
    return 1


@define_agent(description="One step, then waits for approval.")
async def agent(input: dict[str, Any], run: Run) -> str:
    await run.step("work", work)
    approved = await run.interrupt("approve", {"x": 1}, answer=bool)
    return "ok" if approved else "declined"
