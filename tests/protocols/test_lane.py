"""A run's start and resume answered without Starlette's stack (``AgentUnit._lane``): the same
answers as through the stack, every error included, and the stack whenever it holds anything more."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from agent_unit import Run, RunNotFound, create_agent_unit, define_agent
from agent_unit.http.app import AgentUnit


@define_agent
async def approve(input: None, run: Run) -> str:
    await run.step("work", lambda: 1)
    return "ok" if await run.interrupt("approve", answer=bool) else "declined"


class Seen:
    """A user's middleware: it records every path it sees, and answers nothing itself."""

    paths: ClassVar[list[str]] = []

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            Seen.paths.append(scope["path"])
        await self.app(scope, receive, send)


def _app(tmp_path: Path, name: str, *, middleware: bool = False) -> AgentUnit:
    app = create_agent_unit({"approve": approve}, store=f"sqlite:///{tmp_path / name}.db", background_sweep=False)
    if middleware:
        Seen.paths.clear()
        app.user_middleware.append(Middleware(Seen))
    return app


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[AgentUnit, AgentUnit]]:
    lane, stack = _app(tmp_path, "lane"), _app(tmp_path, "stack", middleware=True)
    yield lane, stack
    await lane.engine.aclose()
    await stack.engine.aclose()


def _client(app: AgentUnit, *, raise_errors: bool = True) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=raise_errors)
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


async def _answers(app: AgentUnit) -> list[tuple[int, Any]]:
    """The status and the part of the body that does not depend on ids, of each request in turn."""
    answers: list[tuple[int, Any]] = []

    def seen(response: httpx.Response) -> dict[str, Any]:
        body = response.json()
        answers.append((response.status_code, (body.get("error") or {}).get("code") or body.get("status")))
        return dict(body)

    async with _client(app) as client:
        run = seen(await client.post("/agents/approve/runs?wait=1", json={"input": None}))
        seen(await client.post("/agents/nobody/runs?wait=1", json={"input": None}))
        seen(
            await client.post(
                "/agents/approve/runs", content=b"{not json", headers={"content-type": "application/json"}
            )
        )
        seen(await client.post("/agents/approve/runs", json={"input": None, "extra": 1}))
        seen(await client.post("/agents/approve/runs", content=b"x", headers={"content-type": "text/plain"}))
        seen(await client.post(f"/runs/{run['id']}/resume?wait=1", json={"answer": "yes"}))
        seen(await client.post(f"/runs/{run['id']}/resume?wait=1", json={"answer": True, "other": 1}))
        seen(await client.post("/runs/run_nosuchrun/resume?wait=1", json={"answer": True}))
        seen(await client.post(f"/runs/{run['id']}/resume?wait=1", json={"answer": True}))
        seen(await client.post(f"/runs/{run['id']}/resume?wait=1", json={"answer": True}))  # finished: 409
        seen(await client.post(f"/runs/{run['id']}/resume", headers={"host": "evil.example"}, json={"answer": True}))
    return answers


async def test_the_lane_answers_every_request_as_the_stack_does(pair: tuple[AgentUnit, AgentUnit]) -> None:
    lane, stack = pair
    through_lane, through_stack = await _answers(lane), await _answers(stack)
    assert through_lane == through_stack
    assert [status for status, _ in through_lane] == [200, 404, 400, 400, 415, 422, 400, 404, 200, 409, 421]
    assert lane._lane({"type": "http", "method": "POST", "path": "/runs/run_x/resume", "headers": []}) is not None
    assert stack._lane({"type": "http", "method": "POST", "path": "/runs/run_x/resume", "headers": []}) is None
    assert len(Seen.paths) == 11  # the user's middleware saw every request of the stack's app


async def test_start_and_resume_take_the_lane_and_other_requests_the_stack(tmp_path: Path) -> None:
    app = _app(tmp_path, "runs")
    async with _client(app) as client:
        await client.get("/agents")  # the first request builds Starlette's stack, as without the lane
        assert app.middleware_stack is not None
        stacked: list[str] = []
        stack = app.middleware_stack

        async def counted(scope: Any, receive: Any, send: Any) -> None:
            stacked.append(f"{scope['method']} {scope['path']}")
            await stack(scope, receive, send)

        app.middleware_stack = counted
        run = (await client.post("/agents/approve/runs?wait=1", json={"input": None})).json()
        await client.post(f"/runs/{run['id']}/resume?wait=1", json={"answer": True})
        await client.get(f"/runs/{run['id']}")
        async with client.stream(
            "POST", "/agents/approve/runs", json={"input": None}, headers={"accept": "text/event-stream"}
        ) as stream:
            await stream.aread()
    assert stacked == [f"GET /runs/{run['id']}", "POST /agents/approve/runs"]  # the read, and the stream
    await app.engine.aclose()


async def test_middleware_cannot_be_added_once_the_lane_has_opened(tmp_path: Path) -> None:
    """As with Starlette alone: the first request fixes the stack (so the lane never skips a middleware added later)."""
    app = _app(tmp_path, "late")
    async with _client(app) as client:
        assert (await client.post("/agents/approve/runs?wait=1", json={"input": None})).status_code == 200
    with pytest.raises(RuntimeError, match="after an application has started"):
        app.add_middleware(Seen)
    await app.engine.aclose()


async def test_an_exception_handler_of_the_users_is_used_for_start_and_resume(tmp_path: Path) -> None:
    app = _app(tmp_path, "handled")

    async def gone(request: Request, exc: Exception) -> Response:
        return PlainTextResponse("no such run here", status_code=410)

    app.add_exception_handler(RunNotFound, gone)
    async with _client(app) as client:
        answered = await client.post("/runs/run_nosuchrun/resume?wait=1", json={"answer": True})
    assert (answered.status_code, answered.text) == (410, "no such run here")
    await app.engine.aclose()


@pytest.mark.parametrize("middleware", [False, True], ids=["lane", "stack"])
async def test_an_unexpected_error_is_a_500_and_goes_on_to_the_server(
    tmp_path: Path, middleware: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(tmp_path, "boom", middleware=middleware)

    async def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(app.gateway, "start", boom)
    async with _client(app, raise_errors=False) as client:
        answered = await client.post("/agents/approve/runs?wait=1", json={"input": None})
    assert answered.status_code == 500
    assert answered.json()["error"]["message"] == "internal error: the server logged the details"
    async with _client(app) as client:
        with pytest.raises(RuntimeError, match="boom"):  # raised on, for the server's log
            await client.post("/agents/approve/runs?wait=1", json={"input": None})
    await app.engine.aclose()
