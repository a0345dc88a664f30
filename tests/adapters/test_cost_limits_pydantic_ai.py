"""Cost limits and per-agent limits on a PydanticAI agent (its function model counts tokens): a
model call that would pass the run's cost is not made, priced by the deployment's ``[prices]`` or
by ``genai-prices`` for known models; the cost shows in the run's and the thread's usage; an
agent's own limits hold beside the deployment's (the lower wins) and a start may only lower them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from agent_unit import RunStatus, create_agent_unit, define_agent
from agent_unit._prices import Prices
from agent_unit.discovery import discover_agents
from agent_unit.errors import InvalidArgument
from agent_unit.testing import create_test_unit, execute_again

from ..conftest import StoreFactory

# PydanticAI is imported where an agent is built, not here: importing it costs ~0.6 s of CPU, which
# every pytest worker would otherwise pay to collect this module.
if TYPE_CHECKING:
    from pydantic_ai import Agent

# USD per million tokens: a cent a token, so one call of the test model costs cents.
CENT_A_TOKEN = {"models": {"function:respond:": {"input": 10_000, "output": 10_000}}}


def counted_agent(calls: list[int], model_name: str | None = None) -> Agent[None, str]:
    """Two model calls per run: one asks for the tool, the next answers with its result."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(len(messages))
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"order": "o_1"}, tool_call_id="call_1")])
        return ModelResponse(parts=[TextPart("the order shipped")])

    model = FunctionModel(respond) if model_name is None else FunctionModel(respond, model_name=model_name)
    agent: Agent[None, str] = Agent(model, name="support")

    @agent.tool_plain
    def lookup(order: str) -> str:
        return f"{order} shipped"

    return agent


async def test_a_model_call_that_would_pass_the_cost_limit_is_not_made_until_the_limit_is_raised(
    store_factory: StoreFactory,
) -> None:
    calls: list[int] = []
    store = store_factory()
    unit = create_test_unit({"support": counted_agent(calls)}, store, limits={"cost_usd": 0.05}, prices=CENT_A_TOKEN)
    parked = await unit.run("support", "where is my order?")
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None
    assert parked.interrupt.name == "limit-reached" and calls == [1]  # the second call was not made
    [spent] = parked.usage
    cost = (spent["input_tokens"] + spent["output_tokens"]) / 100
    assert spent["cost_usd"] == pytest.approx(cost) and cost >= 0.05  # the run record shows what it cost
    payload = parked.interrupt.payload
    assert payload["limit"] == "cost_usd" and payload["max"] == 0.05 and payload["used"] == pytest.approx(cost)
    # A person raises the limit: another process goes on from the call it stopped before, none made twice.
    again = create_test_unit({"support": counted_agent(calls)}, store, clock=unit.clock, prices=CENT_A_TOKEN)
    done = await again.resume(parked.id, {"cost_usd": 5})
    assert done.status == RunStatus.completed and done.output == "the order shipped"
    assert calls == [1, 3]
    [total] = done.usage
    assert total["cost_usd"] == pytest.approx((total["input_tokens"] + total["output_tokens"]) / 100)
    await execute_again(again, parked.id)  # a recovery replays the raise at the same point: nothing runs
    assert (await again.get(parked.id)).status == RunStatus.completed and calls == [1, 3]
    await unit.close()
    await again.close()


async def test_a_cost_limit_fails_the_run_when_so_configured() -> None:
    calls: list[int] = []
    unit = create_test_unit(
        {"support": counted_agent(calls)}, limits={"cost_usd": 0.01, "on_limit": "fail"}, prices=CENT_A_TOKEN
    )
    failed = await unit.run("support", "where is my order?")
    assert failed.status == RunStatus.failed and failed.error is not None
    assert failed.error.type == "LimitReached" and "cost_usd limit (0.01, used 0." in failed.error.message
    assert calls == [1]
    await unit.close()


async def test_known_models_are_priced_by_genai_prices_and_the_deployments_prices_win() -> None:
    from genai_prices import Usage, calc_price

    calls: list[int] = []
    unit = create_test_unit({"support": counted_agent(calls, "gpt-4o")}, limits={"cost_usd": 1})
    done = await unit.run("support", "where is my order?")
    assert done.status == RunStatus.completed
    [spent] = done.usage
    known = calc_price(Usage(input_tokens=spent["input_tokens"], output_tokens=spent["output_tokens"]), "gpt-4o")
    assert spent["cost_usd"] == pytest.approx(float(known.total_price)) and spent["cost_usd"] > 0
    await unit.close()
    mine = {"models": {"gpt-4o": {"input": 1_000_000, "output": 0}}}  # a dollar an input token
    unit = create_test_unit({"support": counted_agent(calls, "gpt-4o")}, limits={"cost_usd": 1}, prices=mine)
    parked = await unit.run("support", "where is my order?")
    assert parked.interrupt is not None and parked.interrupt.name == "limit-reached"
    assert parked.usage[0]["cost_usd"] == parked.usage[0]["input_tokens"]
    await unit.close()


async def test_a_model_nothing_prices_stops_a_run_with_a_cost_limit_and_says_which() -> None:
    calls: list[int] = []
    unit = create_test_unit({"support": counted_agent(calls)}, limits={"cost_usd": 100})
    parked = await unit.run("support", "where is my order?")
    assert parked.interrupt is not None and calls == [1]
    payload = parked.interrupt.payload
    assert payload["limit"] == "cost_usd" and payload["used"] is None
    assert payload["unpriced"] == ["function:function:respond:"]
    assert "cost_usd" not in parked.usage[0]
    done = await unit.resume(parked.id, {"cost_usd": None})  # the person lifts the cost limit
    assert done.status == RunStatus.completed and calls == [1, 3]
    await unit.close()


async def test_a_threads_cost_is_read_in_the_run_list() -> None:
    app = create_agent_unit({"support": counted_agent([])}, store="memory://", prices=CENT_A_TOKEN)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        for _ in range(2):
            body = {"input": "hi", "thread_id": "customer-7"}
            assert (await http.post("/agents/support/runs?wait=1", json=body)).json()["status"] == "completed"
        listed = (await http.get("/runs", params={"thread_id": "customer-7"})).json()
        [total] = listed["thread_usage"]
        assert total["cost_usd"] == pytest.approx(sum(run["usage"][0]["cost_usd"] for run in listed["runs"]))
        assert total["cost_usd"] == pytest.approx((total["input_tokens"] + total["output_tokens"]) / 100)
    await app.engine.aclose()


def test_prices_are_per_million_tokens_with_cached_input_apart() -> None:
    prices = Prices.model_validate(
        {"known": False, "models": {"openai:gpt-x": {"input": 2, "output": 8, "cached_input": 0.5}}}
    )
    entry = {"provider": "openai", "model": "gpt-x", "inputTokens": 1_000_000, "outputTokens": 500_000}
    assert prices.cost(entry) == pytest.approx(2 + 4)
    assert prices.cost({**entry, "cachedInputTokens": 400_000}) == pytest.approx(0.6 * 2 + 0.4 * 0.5 + 4)
    assert prices.cost({**entry, "provider": "azure"}) is None  # a provider's price is that provider's
    assert prices.cost({**entry, "model": "gpt-4o"}) is None  # known prices are off


async def test_an_agents_own_limits_hold_beside_the_deployments_and_the_lower_wins() -> None:
    calls: list[int] = []
    agents = {"support": define_agent(counted_agent(calls), limits={"model_calls": 1})}
    unit = create_test_unit(agents, limits={"model_calls": 5, "total_tokens": 10_000})
    parked = await unit.run("support", "where is my order?")
    assert parked.interrupt is not None and parked.interrupt.payload["limit"] == "model_calls"
    assert parked.limits is not None and parked.limits.model_calls == 1 and parked.limits.total_tokens == 10_000
    assert calls == [1]
    with pytest.raises(InvalidArgument, match="over the most a run of this agent may have"):
        await unit.engine.start("support", "hi", limits={"model_calls": 2})  # a start may only lower them
    await unit.close()
    calls.clear()
    strict = create_test_unit(agents, limits={"model_calls": 0})  # the deployment's is lower: it wins
    parked = await strict.run("support", "where is my order?")
    assert parked.interrupt is not None and parked.interrupt.payload["max"] == 0 and calls == []
    await strict.close()


async def test_an_agents_on_limit_overrides_the_deployments() -> None:
    agents = {"support": define_agent(counted_agent([]), limits={"model_calls": 1, "on_limit": "fail"})}
    unit = create_test_unit(agents, limits={"total_tokens": 10_000})
    failed = await unit.run("support", "where is my order?")
    assert failed.status == RunStatus.failed and failed.error is not None and failed.error.type == "LimitReached"
    lowered = await unit.engine.start("support", "hi", limits={"total_tokens": 5}, wait=True)
    assert lowered.limits is not None and lowered.limits.on_limit == "fail"  # a start naming none keeps it
    await unit.close()


def test_a_framework_agent_given_limits_in_its_file_is_discovered_once_with_them(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "helpdesk.py").write_text(
        "from pydantic_ai import Agent\n"
        "from agent_unit import define_agent\n\n"
        "support = Agent('test', name='support')\n"
        "agent = define_agent(support, description='Answers tickets.', limits={'total_tokens': 900})\n"
    )
    [(name, agent)] = discover_agents(tmp_path).items()
    assert name == "helpdesk" and agent.framework == "pydantic-ai" and agent.description == "Answers tickets."
    assert agent.limits is not None and agent.limits.total_tokens == 900
