"""The ``pause`` and ``steps`` agents written as native Temporal workflows (the benchmark's comparison).

Only ``temporalio`` here: the module is loaded in the workflow sandbox.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import activity, workflow


@activity.defn(name="noop")
async def noop(i: int) -> int:
    return i


@workflow.defn(name="bench.pause")
class PauseWorkflow:
    """One activity, then a wait for an answer: the native shape of the ``pause`` agent."""

    def __init__(self) -> None:
        self.waiting = False
        self.answered = False

    @workflow.run
    async def run(self, i: int) -> str:
        await workflow.execute_activity("noop", i, start_to_close_timeout=timedelta(minutes=1))
        self.waiting = True
        await workflow.wait_condition(lambda: self.answered)
        return "done"

    @workflow.update(name="parked")
    async def parked(self) -> None:
        await workflow.wait_condition(lambda: self.waiting)

    @workflow.signal(name="answer")
    def answer(self) -> None:
        self.answered = True


@workflow.defn(name="bench.steps")
class StepsWorkflow:
    """N steps, one activity each (``local``: one local activity each)."""

    @workflow.run
    async def run(self, params: list[Any]) -> int:
        n, local = int(params[0]), bool(params[1])
        for i in range(n):
            if local:
                await workflow.execute_local_activity("noop", i, start_to_close_timeout=timedelta(minutes=1))
            else:
                await workflow.execute_activity("noop", i, start_to_close_timeout=timedelta(minutes=1))
        return n
