"""``agent_unit.env``: the host's configuration, and ``wait_until`` work that is never dropped."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from agent_unit import Run, create_agent_unit, define_agent
from agent_unit._host import Host, use_host
from agent_unit.env import drain, env, pending, wait_until
from agent_unit.testing import create_test_unit

from ..hosts.test_mangum import Context, http_api_event


async def later(done: list[str], value: str, delay: float = 0.05) -> None:
    await asyncio.sleep(delay)
    done.append(value)


async def broken() -> None:
    await asyncio.sleep(0)
    raise ValueError("the webhook answered 500")


def test_env_reads_the_process_environment_then_the_bound_values_and_cannot_be_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AU_TEST_KEY", "from-process")
    assert env["AU_TEST_KEY"] == "from-process"
    assert env.get("AU_TEST_MISSING", "default") == "default"
    assert "AU_TEST_KEY" in env and "AU_TEST_KEY" in list(env)
    monkeypatch.setenv("AU_TEST_KEY", "changed")
    assert env["AU_TEST_KEY"] == "changed"  # read at each access, never a copy
    with use_host(Host(bindings={"AU_TEST_KEY": "from-binding", "DB": object()})):
        assert env["AU_TEST_KEY"] == "from-binding" and "DB" in env
    assert env["AU_TEST_KEY"] == "changed" and "DB" not in env  # the host's bindings end with its block
    with pytest.raises(TypeError):
        env["AU_TEST_KEY"] = "x"  # type: ignore[index]
    assert "changed" not in repr(env)  # values hold secrets


async def test_drain_waits_for_the_work_and_work_started_while_draining() -> None:
    done: list[str] = []

    async def chain() -> None:
        await later(done, "first")
        wait_until(later(done, "second"))

    wait_until(chain())
    assert pending() == ["test_drain_waits_for_the_work_and_work_started_while_draining.<locals>.chain"]
    assert await drain(5) == []
    assert done == ["first", "second"]


async def test_work_that_raises_is_logged_with_its_name_and_traceback(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="agent_unit"):
        wait_until(broken(), name="notify-webhook")
        await drain(5)
    [record] = [r for r in caplog.records if r.name == "agent_unit"]
    assert "notify-webhook failed" in record.getMessage()
    assert record.exc_info is not None and "the webhook answered 500" in str(record.exc_info[1])


async def test_work_still_running_at_the_bound_is_cut_and_each_piece_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    forever = asyncio.Event()
    with caplog.at_level(logging.ERROR, logger="agent_unit"):
        wait_until(forever.wait(), name="slow-export")
        assert await drain(0.05) == ["slow-export"]
    assert any("slow-export was still running at shutdown" in r.getMessage() for r in caplog.records)
    assert pending() == []


def test_work_from_a_sync_routes_worker_thread_runs_on_the_apps_loop() -> None:
    done: list[str] = []

    def order(request: Request) -> JSONResponse:  # a sync route: Starlette runs it in a worker thread
        wait_until(later(done, "from-thread"))
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/order", order, methods=["POST"])])
    with TestClient(app) as client:
        assert client.post("/order").status_code == 200
        client.portal.call(drain, 5)  # type: ignore[union-attr]
    assert done == ["from-thread"]


def test_without_an_event_loop_wait_until_is_an_error_not_a_silent_drop() -> None:
    with pytest.raises(RuntimeError, match="needs a running event loop"):
        wait_until(later([], "never"))


async def test_a_hosts_own_wait_until_receives_the_work_within_its_block(caplog: pytest.LogCaptureFixture) -> None:
    given: list[Any] = []
    with use_host(Host(wait_until=given.append)):
        wait_until(broken(), name="to-the-host")
    assert pending() == [] and len(given) == 1
    with caplog.at_level(logging.ERROR, logger="agent_unit"):
        await given[0]  # the host runs it: a failure is still logged by name
    assert any("to-the-host failed" in r.getMessage() for r in caplog.records)


def test_a_server_shutdown_waits_for_wait_until_work_started_by_a_run() -> None:
    done: list[str] = []

    @define_agent
    async def notify(input: str, run: Run) -> str:
        wait_until(later(done, input, delay=0.2))
        return "answered"

    with TestClient(create_agent_unit({"notify": notify}, store="memory://")) as client:
        answer = client.post("/agents/notify/runs?wait=1", json={"input": "receipt"})
        assert answer.json()["output"] == "answered"
    assert done == ["receipt"]  # the lifespan's shutdown drained it


async def test_a_test_unit_returns_once_the_runs_wait_until_work_is_done() -> None:
    done: list[str] = []

    @define_agent
    async def notify(input: str, run: Run) -> str:
        wait_until(later(done, input))
        return "answered"

    async with create_test_unit({"notify": notify}) as unit:
        await unit.run("notify", "receipt")
        assert done == ["receipt"]


def _route_app(done: list[str]) -> Starlette:
    async def order(request: Request) -> JSONResponse:
        wait_until(later(done, "email sent"))
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/order", order, methods=["POST"])])
    app.engine = None  # type: ignore[attr-defined]  # the Lambda handler reads it only for the sweep
    return app


def test_on_lambda_the_response_is_returned_only_once_the_work_is_done() -> None:
    from agent_unit.hosts.aws_lambda import lambda_handler

    done: list[str] = []
    handler = lambda_handler(lambda: _route_app(done))
    response = handler(http_api_event("POST", "/order", {}, {}), Context())
    assert response["statusCode"] == 200
    assert done == ["email sent"]


async def test_on_vercel_the_invocation_lasts_until_the_requests_work_is_done() -> None:
    from agent_unit.hosts.vercel import create_app

    done: list[str] = []

    @define_agent
    async def notify(input: str, run: Run) -> str:
        wait_until(later(done, input))
        return "answered"

    app = create_app({"notify": notify}, store="memory://")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        answer = await client.post("/agents/notify/runs?wait=1", json={"input": "receipt"})
        assert answer.status_code == 200
        assert done == ["receipt"]  # the app returned (the invocation ended) only after the work
        assert pending() == []  # the host's, not this process's tracker
    await app.engine.aclose()
