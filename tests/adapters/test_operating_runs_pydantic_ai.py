"""Operating runs of a PydanticAI agent (its test models count tokens). Spending limits: a model call
that would pass a limit is not made; the run parks at ``limit-reached``, goes on once the limit is
raised, and no model call is made twice; or it fails, as configured. Tool approvals take their
deadline from the deployment's ``approval_timeout``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from agent_unit import RunStatus, create_agent_unit
from agent_unit._limits import Limits
from agent_unit.errors import InvalidArgument
from agent_unit.testing import create_test_unit, execute_again

from ..conftest import StoreFactory

# PydanticAI is imported where an agent is built, not here: importing it costs ~0.6 s of CPU, which
# every pytest worker would otherwise pay to collect this module.
if TYPE_CHECKING:
    from pydantic_ai import Agent


def counted_agent(calls: list[int]) -> Agent[None, str]:
    """Two model calls per run: one asks for the tool, the next answers with its result."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(len(messages))
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"order": "o_1"}, tool_call_id="call_1")])
        return ModelResponse(parts=[TextPart("the order shipped")])

    agent: Agent[None, str] = Agent(FunctionModel(respond), name="support")

    @agent.tool_plain
    def lookup(order: str) -> str:
        return f"{order} shipped"

    return agent


async def test_a_model_call_that_would_pass_the_token_limit_is_not_made_until_the_limit_is_raised(
    store_factory: StoreFactory,
) -> None:
    calls: list[int] = []
    unit = create_test_unit({"support": counted_agent(calls)}, store_factory(), limits={"total_tokens": 1})
    parked = await unit.run("support", "where is my order?")
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None
    assert parked.interrupt.name == "limit-reached" and calls == [1]  # the second call was not made
    payload = parked.interrupt.payload
    assert payload["limit"] == "total_tokens" and payload["max"] == 1 and payload["used"] > 1
    assert payload["call"].startswith("model:")
    # A person raises the limit: the run goes on from the call it stopped before, the first not made again.
    again = create_test_unit({"support": counted_agent(calls)}, store_factory(), clock=unit.clock)
    done = await again.resume(parked.id, {"total_tokens": 100_000})
    assert done.status == RunStatus.completed and done.output == "the order shipped"
    assert calls == [1, 3]  # each call made once
    await unit.close()
    await again.close()


async def test_a_model_call_limit_fails_the_run_when_so_configured() -> None:
    calls: list[int] = []
    unit = create_test_unit({"support": counted_agent(calls)}, limits=Limits(model_calls=1, on_limit="fail"))
    failed = await unit.run("support", "where is my order?")
    assert failed.status == RunStatus.failed and failed.error is not None
    assert failed.error.type == "LimitReached" and "model_calls limit (1" in failed.error.message
    assert calls == [1]
    await unit.close()


async def test_a_start_may_lower_a_limit_never_raise_it_over_the_deployments() -> None:
    calls: list[int] = []
    unit = create_test_unit({"support": counted_agent(calls)}, limits={"model_calls": 5})
    lowered = await unit.engine.start("support", "hi", limits={"model_calls": 1}, wait=True)
    assert lowered.status == RunStatus.interrupted and lowered.limits is not None
    assert lowered.limits.model_calls == 1 and calls == [1]
    with pytest.raises(InvalidArgument, match="over the most a run of this agent may have"):
        await unit.engine.start("support", "hi", limits={"model_calls": 9})
    await unit.close()


async def test_a_start_over_http_may_carry_limits_and_an_unknown_one_is_refused() -> None:
    app = create_agent_unit({"support": counted_agent([])}, store="memory://", limits={"total_tokens": 10_000})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        started = await http.post("/agents/support/runs?wait=1", json={"input": "hi", "limits": {"model_calls": 1}})
        assert started.json()["limits"]["model_calls"] == 1 and started.json()["limits"]["total_tokens"] == 10_000
        assert started.json()["interrupt"]["name"] == "limit-reached"
        over = await http.post("/agents/support/runs", json={"input": "hi", "limits": {"total_tokens": 10**6}})
        assert over.status_code == 422
        assert "over the most a run of this agent may have" in over.json()["error"]["message"]
        unknown = await http.post("/agents/support/runs", json={"input": "hi", "limits": {"dollars": 5}})
        assert unknown.status_code == 422 and "limits.dollars" in unknown.json()["error"]["message"]
    await app.engine.aclose()


async def test_limits_hold_across_a_replay_after_a_raise() -> None:
    calls: list[int] = []
    unit = create_test_unit({"support": counted_agent(calls)}, limits={"model_calls": 1})
    parked = await unit.run("support", "where is my order?")
    done = await unit.resume(parked.id, {"model_calls": 2})
    assert done.status == RunStatus.completed and calls == [1, 3]
    await execute_again(unit, parked.id)  # a recovery replays the raise at the same point: nothing runs
    assert (await unit.get(parked.id)).output == "the order shipped" and calls == [1, 3]
    await unit.close()


async def test_a_threads_token_totals_are_read_in_the_run_list() -> None:
    app = create_agent_unit({"support": counted_agent([])}, store="memory://")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        for _ in range(3):
            body = {"input": "hi", "thread_id": "customer-7"}
            assert (await http.post("/agents/support/runs?wait=1", json=body)).json()["status"] == "completed"
        listed = (await http.get("/runs", params={"thread_id": "customer-7", "limit": 2})).json()
        assert len(listed["runs"]) == 2 and listed["next_cursor"]  # a page of two; the totals are the thread's
        [total] = listed["thread_usage"]
        every = (await http.get("/runs", params={"thread_id": "customer-7"})).json()["runs"]
        assert len(every) == 3
        assert total["total_tokens"] == sum(run["usage"][0]["total_tokens"] for run in every)
        assert total["model"] == every[0]["usage"][0]["model"]
        assert "thread_usage" not in (await http.get("/runs")).json()
    await app.engine.aclose()


async def test_a_tool_approval_nobody_answers_within_the_configured_deadline_is_declined(
    store_factory: StoreFactory,
) -> None:
    from ..support import pydantic_ai_fixtures as fixtures

    fixtures.LOG.clear()
    unit = create_test_unit(fixtures.AGENTS, store_factory(), approval_timeout="1d")
    parked = await unit.run("support", "refund my order")
    assert parked.interrupt is not None and parked.interrupt.name == "tool-approval"
    assert parked.interrupt.expires_at is not None
    await unit.advance("1d")
    done = await unit.get(parked.id)
    assert done.status == RunStatus.completed and done.output == "done: nobody answered by the deadline"
    assert not any(line.startswith("refund") for line in fixtures.LOG)  # the tool was not called
    assert done.answers[0].expired
    await unit.close()
