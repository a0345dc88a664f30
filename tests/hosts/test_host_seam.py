"""One ``Host`` says what a host provides: given to ``create_agent_unit`` or set around a user's own
app with ``use_host``, never left behind in the process for the next app."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from agent_unit import Host, Run, RunStatus, create_agent_unit, define_agent, use_host
from agent_unit._tasks import tasks_from_config
from agent_unit.env import env, wait_until
from agent_unit.hosts import aws_lambda, cloudflare, server, vercel
from agent_unit.stores.memory import MemoryStore
from agent_unit.testing import HOST as TEST_HOST
from agent_unit.testing import create_test_unit


@define_agent
async def greet(input: None, run: Run) -> Any:
    await run.step("one", lambda: 1)
    await run.step("two", lambda: 2)
    return env.get("GREETING")


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")


async def test_units_created_inside_use_host_get_its_answers_and_a_unit_created_after_gets_none() -> None:
    host = Host(name="whole-responses", buffered=True, sweep="scheduled", require_secret=True, secret="s3cret")
    with use_host(host):
        inside = create_agent_unit({"greet": greet}, store=MemoryStore())
    after = create_agent_unit({"greet": greet}, store=MemoryStore())
    assert inside.engine.host is host and after.engine.host.name == "server"
    async with client(inside) as hosted, client(after) as plain:
        started = await hosted.post("/agents/greet/runs", json={"input": None})
        assert started.status_code == 200 and started.json()["status"] == "completed"  # buffered: answered whole
        assert (await plain.post("/agents/greet/runs", json={"input": None})).status_code == 202
        assert (await hosted.post("/__agent-unit/sweep")).status_code == 401  # the host requires its secret
        swept = await hosted.post("/__agent-unit/sweep", headers={"authorization": "Bearer s3cret"})
        assert swept.status_code == 200
        assert (await plain.post("/__agent-unit/sweep")).status_code == 200  # a plain server outside production


async def test_two_hosts_serving_at_once_each_read_their_own_bindings_and_get_their_own_work() -> None:
    both_running = asyncio.Barrier(2)

    @define_agent
    async def agent(input: str, run: Run) -> Any:
        await both_running.wait()  # both hosts' runs are in flight at once
        wait_until(asyncio.sleep(0), name=f"after {input}")
        return run.secrets.get("KEY")

    async def serve(value: str) -> tuple[Any, int]:
        handed: list[Any] = []
        with use_host(Host(bindings={"KEY": value}, wait_until=handed.append)):
            unit = create_test_unit({"a": agent})
            output = (await unit.run("a", value)).output
        for work in handed:
            await work
        return output, len(handed)

    assert await asyncio.gather(serve("one"), serve("two")) == [("one", 1), ("two", 1)]
    assert env.get("KEY") is None  # nothing of either host outlives its block


async def test_a_host_given_to_create_agent_unit_serves_its_requests_with_its_bindings() -> None:
    unit = create_agent_unit({"greet": greet}, store=MemoryStore(), host=Host(bindings={"GREETING": "hello"}))
    async with client(unit) as http:
        done = await http.post("/agents/greet/runs?wait=1", json={"input": None})
    assert done.json()["output"] == "hello"


async def test_a_run_that_yields_continues_through_the_host_under_the_units_mount_and_base_path() -> None:
    paths: list[str] = []
    handed: list[str] = []

    def continues(path: str) -> Any:
        paths.append(path)
        return handed.append

    with use_host(Host(continues=continues)):
        unit = create_agent_unit({"greet": greet}, store=MemoryStore(), base_path="/v1", budget="0s")
    outer = Starlette(routes=[Mount("/api/ai", app=unit)])
    async with client(outer) as http:
        started = await http.post("/api/ai/v1/agents/greet/runs?wait=1", json={"input": None})
    assert started.json()["status"] == RunStatus.queued.value
    assert handed == [started.json()["id"]] and paths[-1] == "/api/ai/v1"


async def test_a_host_without_a_continuation_url_continues_a_yielded_run_in_this_process() -> None:
    unit = create_agent_unit({"greet": greet}, store=MemoryStore(), budget="0s", host=Host(continues=lambda path: None))
    async with client(unit) as http:
        started = await http.post("/agents/greet/runs", json={"input": None})
        await unit.engine.wait(started.json()["id"])
        assert (await http.get(f"/runs/{started.json()['id']}")).json()["status"] == "completed"


def test_each_built_in_host_is_one_host() -> None:
    lam = aws_lambda.lambda_host("https://fn.example", "s")
    assert lam.buffered and lam.sweep == "scheduled" and lam.require_secret and lam.allowed_hosts == ("*",)
    assert lam.on_continue("/api") is not None
    assert cloudflare.HOST.sweep == "scheduled" and cloudflare.HOST.allowed_hosts == ("*",)
    assert Host() == server.HOST and server.HOST.sweep == "background" and not server.HOST.buffered
    assert TEST_HOST.name == "test" and create_test_unit({"greet": greet}).engine.host is TEST_HOST
    with pytest.raises(ValueError, match="use 'background', 'scheduled' or 'alarm'"):
        Host(sweep="sometimes")  # type: ignore[arg-type]


def test_vercels_host_needs_the_secret_and_continues_at_the_deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_UNIT_SECRET", "s")
    monkeypatch.setenv("VERCEL_URL", "app-abc.vercel.app")
    monkeypatch.delenv("AGENT_UNIT_URL", raising=False)
    host = vercel.vercel_host()
    assert host.secret == "s" and host.require_secret and host.sweep == "scheduled"
    assert host.on_continue("/api") is not None
    monkeypatch.delenv("AGENT_UNIT_SECRET")
    assert vercel.vercel_host().on_continue("") is None  # no secret: the run continues in this invocation


TICKS: list[datetime] = []


async def record_tick(name: str, scheduled_at: datetime) -> None:
    TICKS.append(scheduled_at)


async def test_a_hosts_tick_is_claimed_through_the_engine_once() -> None:
    task = tasks_from_config({"digest": {"schedule": "0 8 * * *", "handler": f"{__name__}:record_tick"}})["digest"]
    unit = create_test_unit({"greet": greet})
    at = datetime(2026, 3, 2, 8, tzinfo=UTC)
    first = await unit.engine.run_tick(task, at)
    again = await unit.engine.run_tick(task, at, owner="another-delivery")  # a repeated delivery
    assert first["ran"] and not again["ran"] and [at] == TICKS


def test_lambdas_handler_creates_your_apps_units_on_its_host_and_leaves_none_behind() -> None:
    from .test_mangum import http_api_event

    made: list[Any] = []

    def create_app() -> Any:  # a user's own app: it calls create_agent_unit() itself
        made.append(create_agent_unit({"greet": greet}, store=MemoryStore()))
        return Starlette(routes=[Mount("/ai", app=made[0])])

    handler = aws_lambda.lambda_handler(create_app, host=aws_lambda.lambda_host(None, "s3cret"))
    started = handler(http_api_event("POST", "/ai/agents/greet/runs", {"input": None}, {}), None)
    assert started["statusCode"] == 200  # whole responses: the run ran in the invocation
    refused = handler(http_api_event("POST", "/ai/__agent-unit/sweep", {}, {}), None)
    assert refused["statusCode"] == 401  # Lambda's units need the secret
    assert (
        made[0].engine.host.name == "aws-lambda"
        and create_agent_unit({}, store=MemoryStore()).engine.host.name == "server"
    )
