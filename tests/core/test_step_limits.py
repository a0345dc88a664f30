"""A plain agent's own model calls: a step that reports its usage (``run.step(..., usage=...)``)
counts in the run's usage and cost, and the run's limits (the deployment's and the agent's) are
checked before it runs, so the call that would pass one is not made. Steps that report no usage
are not model calls: limits leave them alone."""

from __future__ import annotations

from typing import Any

import pytest

from agent_unit import Run, RunStatus, define_agent
from agent_unit.testing import create_test_unit, execute_again

from ..conftest import StoreFactory


def asking(calls: list[str], limits: dict[str, Any] | None = None) -> Any:
    """Two calls to a model the agent calls itself, each spending 40 input and 20 output tokens."""

    @define_agent(limits=limits)
    async def agent(input: None, run: Run) -> list[str]:
        await run.step("load", lambda: calls.append("load"))
        answers = []
        for question in ("first", "second"):

            def ask(question: str = question) -> dict[str, Any]:
                calls.append(question)
                return {"text": f"answer {question}", "tokens": {"in": 40, "out": 20}}

            reply = await run.step(
                "ask",
                ask,
                usage=lambda r: {
                    "provider": "acme",
                    "model": "m-1",
                    "input_tokens": r["tokens"]["in"],
                    "output_tokens": r["tokens"]["out"],
                },
            )
            answers.append(reply["text"])
        return answers

    return agent


async def test_a_step_that_reports_usage_is_not_made_once_it_would_pass_a_limit(store_factory: StoreFactory) -> None:
    calls: list[str] = []
    store = store_factory()
    unit = create_test_unit({"a": asking(calls)}, store, limits={"total_tokens": 50})
    parked = await unit.run("a")
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None
    assert parked.interrupt.name == "limit-reached" and calls == ["load", "first"]
    assert parked.interrupt.payload["used"] == 60 and parked.interrupt.payload["call"] == "step:ask#1"
    assert parked.usage == [
        {"provider": "acme", "model": "m-1", "input_tokens": 40, "output_tokens": 20, "total_tokens": 60}
    ]
    again = create_test_unit({"a": asking(calls)}, store, clock=unit.clock)
    done = await again.resume(parked.id, {"total_tokens": 500})
    assert done.status == RunStatus.completed and done.output == ["answer first", "answer second"]
    assert calls == ["load", "first", "second"] and done.usage[0]["total_tokens"] == 120
    await execute_again(again, parked.id)
    assert calls == ["load", "first", "second"]
    await unit.close()
    await again.close()


async def test_an_agents_cost_limit_holds_over_the_steps_it_prices() -> None:
    calls: list[str] = []
    prices = {"models": {"m-1": {"input": 1, "output": 1}}}  # USD per million tokens
    agent = asking(calls, limits={"cost_usd": 0.00005, "on_limit": "fail"})
    unit = create_test_unit({"a": agent}, limits={"cost_usd": 1}, prices=prices)
    failed = await unit.run("a")
    assert failed.status == RunStatus.failed and failed.error is not None
    assert failed.error.type == "LimitReached" and "cost_usd limit (5e-05" in failed.error.message
    assert calls == ["load", "first"] and failed.usage[0]["cost_usd"] == pytest.approx(0.00006)
    await unit.close()


async def test_steps_that_report_no_usage_are_not_held_by_limits() -> None:
    ran: list[str] = []

    @define_agent(limits={"model_calls": 0, "total_tokens": 0})
    async def agent(input: None, run: Run) -> int:
        for _ in range(3):
            await run.step("work", lambda: ran.append("work"))
        return 3

    unit = create_test_unit({"a": agent})
    assert (await unit.run("a")).status == RunStatus.completed and ran == ["work"] * 3
    await unit.close()


async def test_a_step_whose_usage_is_not_counts_fails_saying_which() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        return await run.step("ask", lambda: "hi", usage=lambda r: {"model": "m-1", "input_tokens": "12"})

    unit = create_test_unit({"a": agent})
    failed = await unit.run("a")
    assert failed.error is not None and failed.error.type == "TypeError"
    assert "usage gave input_tokens = '12'" in failed.error.message
    await unit.close()
