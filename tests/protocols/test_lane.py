"""A run's start and resume answered without Starlette's stack (``AgentUnit._lane``): the same
answers as through the stack, every error included, and the stack whenever it holds anything more."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Host, Route

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


_VARYING = {"id", "thread_id", "created_at", "updated_at", "finished_at", "wake_at", "at", "expires_at"}


def _steady(body: Any) -> Any:
    """``body`` less what depends on the run's id and the time (so two apps' answers compare)."""
    if isinstance(body, dict):
        return {key: _steady(value) for key, value in body.items() if key not in _VARYING}
    if isinstance(body, list):
        return [_steady(value) for value in body]
    if isinstance(body, str) and "run_" in body:
        return "<names a run>"
    return body


async def _answers(app: AgentUnit) -> list[tuple[int, Any, Any, Any]]:
    """Each request's status, headers and body, less what depends on ids and the time, in turn."""
    answers: list[tuple[int, Any, Any, Any]] = []

    def seen(response: httpx.Response) -> dict[str, Any]:
        body = response.json()
        error = body.get("error") if "status" not in body else None  # an error's body, not a run's
        headers = sorted((k, v) for k, v in response.headers.items() if k != "content-length" or error)
        answers.append((response.status_code, (error or {}).get("code") or body.get("status"), headers, _steady(body)))
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
        seen(
            await client.post("/agents/approve/runs", headers={"origin": "https://evil.example"}, json={"input": None})
        )
    return answers


async def test_the_lane_answers_every_request_as_the_stack_does(pair: tuple[AgentUnit, AgentUnit]) -> None:
    lane, stack = pair
    through_lane, through_stack = await _answers(lane), await _answers(stack)
    assert through_lane == through_stack
    assert [answer[0] for answer in through_lane] == [200, 404, 400, 400, 415, 422, 400, 404, 200, 409, 421, 403]
    assert lane._lane({"type": "http", "method": "POST", "path": "/runs/run_x/resume", "headers": []}) is not None
    assert stack._lane({"type": "http", "method": "POST", "path": "/runs/run_x/resume", "headers": []}) is None
    assert len(Seen.paths) == 12  # the user's middleware saw every request of the stack's app


def _laned(app: AgentUnit, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The requests ``app`` answers by its lane, in turn."""
    laned: list[str] = []
    answer = app._answer

    async def counted(route: Any, respond: Any, params: Any, scope: Any, receive: Any, send: Any) -> None:
        laned.append(f"{scope['method']} {scope['path']}")
        await answer(route, respond, params, scope, receive, send)

    monkeypatch.setattr(app, "_answer", counted)
    return laned


async def test_start_and_resume_take_the_lane_and_other_requests_the_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(tmp_path, "runs")
    laned = _laned(app, monkeypatch)
    async with _client(app) as client:
        await client.get("/agents")  # the first request builds Starlette's stack, as without the lane
        assert app.middleware_stack is not None
        run = (await client.post("/agents/approve/runs?wait=1", json={"input": None})).json()
        await client.post(f"/runs/{run['id']}/resume?wait=1", json={"answer": True})
        await client.get(f"/runs/{run['id']}")
        async with client.stream(
            "POST", "/agents/approve/runs", json={"input": None}, headers={"accept": "text/event-stream"}
        ) as stream:
            await stream.aread()
    assert laned == ["POST /agents/approve/runs", f"POST /runs/{run['id']}/resume"]  # not the read, nor the stream
    await app.engine.aclose()


class Refuse:
    """A user's middleware that refuses every request: it shows which path a request took."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        await PlainTextResponse("refused", status_code=403)(scope, receive, send)


async def test_a_stack_rebuilt_or_a_route_table_changed_after_the_first_request_closes_the_lane(
    tmp_path: Path,
) -> None:
    app = _app(tmp_path, "changed")
    async with _client(app) as client:
        assert (await client.post("/agents/approve/runs?wait=1", json={"input": None})).status_code == 200
        app.middleware_stack = None  # Starlette's own way to add middleware late: rebuild the stack
        app.user_middleware.insert(0, Middleware(Refuse))
        assert (await client.post("/agents/approve/runs?wait=1", json={"input": None})).status_code == 403
        app.user_middleware.clear()
        app.middleware_stack = None
        assert (await client.post("/agents/approve/runs?wait=1", json={"input": None})).status_code == 200

        start = next(route for route in app.router.routes if getattr(route, "name", "") == "start")
        app.router.routes.remove(start)  # a route taken away to turn it off: the lane must not answer it
        assert (await client.post("/agents/approve/runs?wait=1", json={"input": None})).status_code in (404, 405)

        async def teapot(request: Request) -> Response:
            return PlainTextResponse("mine", status_code=418)

        app.router.routes.insert(0, Route("/agents/{agent}/runs", teapot, methods=["POST"]))
        assert (await client.post("/agents/approve/runs?wait=1", json={"input": None})).status_code == 418
    await app.engine.aclose()


@pytest.mark.parametrize("late", [False, True], ids=["before", "after the first request"])
async def test_a_wrapped_starlette_takes_the_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, late: bool) -> None:
    """An instrumentation that patches ``Starlette.__call__`` (as Sentry does) sees start and resume
    too, whether it is set up before the app's first request or after it."""
    seen: list[str] = []
    own = Starlette.__call__

    @functools.wraps(own)
    async def instrumented(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(scope["path"])
        await own(self, scope, receive, send)

    app = _app(tmp_path, "wrapped")
    async with _client(app) as client:
        if late:
            assert (await client.get("/agents")).status_code == 200
        monkeypatch.setattr(Starlette, "__call__", instrumented)
        run = (await client.post("/agents/approve/runs?wait=1", json={"input": None})).json()
        await client.post(f"/runs/{run['id']}/resume?wait=1", json={"answer": True})
    assert seen == ["/agents/approve/runs", f"/runs/{run['id']}/resume"]
    await app.engine.aclose()


def _scope_of(seen: list[dict[str, Any]]) -> Any:
    """An ``authorize`` hook that records what Starlette's routing put in the request's scope."""

    def hook(request: Request, action: str, run: dict[str, Any]) -> bool:
        if action in ("start", "resume"):
            scope = request.scope
            seen.append(
                {
                    "app": type(scope["app"]).__name__,
                    "router": scope["router"] is not scope["app"].router,  # True: an outer router's
                    "route": getattr(scope["route"], "name", None),
                    "endpoint": scope["endpoint"] is scope["route"].endpoint,
                    "path_params": sorted(scope["path_params"]),
                    "home": str(request.url_for("home")),
                }
            )
        return True

    return hook


async def test_a_unit_under_a_host_route_sees_the_outer_router_and_path_params(tmp_path: Path) -> None:
    """Mounted by ``Host`` (no ``root_path``), so the lane is open: it keeps the outer router and
    merges its path parameters, as Starlette's router does."""
    answers: dict[str, list[dict[str, Any]]] = {}
    for name, middleware in (("lane", False), ("stack", True)):
        seen: list[dict[str, Any]] = []
        unit = create_agent_unit(
            {"approve": approve},
            store=f"sqlite:///{tmp_path / name}.db",
            background_sweep=False,
            authorize=_scope_of(seen),
            allowed_hosts=["t1.example.com"],
        )
        if middleware:
            unit.user_middleware.append(Middleware(Seen))

        async def home(request: Request) -> Response:
            return PlainTextResponse("home")

        outer = Starlette(routes=[Route("/", home, name="home"), Host("{tenant}.example.com", app=unit)])
        transport = httpx.ASGITransport(app=outer)
        async with httpx.AsyncClient(transport=transport, base_url="http://t1.example.com") as client:
            run = (await client.post("/agents/approve/runs?wait=1", json={"input": None})).json()
            resumed = await client.post(f"/runs/{run['id']}/resume?wait=1", json={"answer": True})
            assert resumed.json()["status"] == "completed"
        answers[name] = seen
        await unit.engine.aclose()
    assert answers["lane"] == answers["stack"]
    assert answers["lane"][0] == {
        "app": "AgentUnit",
        "router": True,
        "route": "start",
        "endpoint": True,
        "path_params": ["agent", "tenant"],
        "home": "http://t1.example.com/",
    }


@pytest.mark.parametrize("middleware", [False, True], ids=["lane", "stack"])
async def test_a_client_gone_before_its_body_is_answered_alike(tmp_path: Path, middleware: bool) -> None:
    app = _app(tmp_path, "gone", middleware=middleware)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/agents/approve/runs",
        "raw_path": b"/agents/approve/runs",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
    }
    await app(scope, receive, send)
    assert [m.get("status") for m in sent if m["type"] == "http.response.start"] == [499]
    assert (app._lane(scope) is None) == middleware  # the lane was what answered, or the stack was
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


class Broken(RunNotFound):
    """An error whose own answer fails to render: the handler raises, as a bug of ours would."""

    def to_dict(self) -> dict[str, Any]:
        raise ValueError("cannot render")


_FAILING = {  # a call the route makes, what it raises, the request, and what goes on to the server
    "unexpected": ("start", RuntimeError("boom"), "/agents/approve/runs?wait=1", {"input": None}, RuntimeError),
    "handler fails": ("run", Broken("gone"), "/runs/run_nosuchrun/resume?wait=1", {"answer": True}, ValueError),
}


@pytest.mark.parametrize("middleware", [False, True], ids=["lane", "stack"])
@pytest.mark.parametrize("case", list(_FAILING))
async def test_an_unexpected_error_or_a_failing_handler_is_a_500_and_goes_on_to_the_server(
    tmp_path: Path, middleware: bool, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    call, error, path, body, raised = _FAILING[case]
    app = _app(tmp_path, "boom", middleware=middleware)

    async def fails(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(app.gateway, call, fails)
    async with _client(app, raise_errors=False) as client:
        answered = await client.post(path, json=body)
    assert answered.status_code == 500
    assert answered.json()["error"]["message"] == "internal error: the server logged the details"
    async with _client(app) as client:
        with pytest.raises(raised):  # raised on, for the server's log
            await client.post(path, json=body)
    await app.engine.aclose()
