"""The HTTP contract, in process (httpx over ASGI): routes, streams, errors, auth, limits."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from agent_unit import Run, RunStatus, create_agent_unit, define_agent
from agent_unit.client import AgentClient, RunEvent, RunPage, RunRecord
from agent_unit.errors import InvalidAnswer, NotInterrupted, RunNotFound

from ..support import fetch
from ..support.http_agents import AGENTS
from ..support.sse import sse


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    app = create_agent_unit(AGENTS, store="memory://", secret="s3cret")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as client:
        client.app = app  # type: ignore[attr-defined]
        yield client
    await app.engine.aclose()


async def start_parked(http: httpx.AsyncClient) -> dict[str, Any]:
    response = await http.post("/agents/refund/runs?wait=1", json={"input": {"order_id": "o_1"}})
    assert response.status_code == 200 and response.json()["status"] == "interrupted"
    return response.json()


async def test_stream_a_run_through_a_pause_and_a_resume(http: httpx.AsyncClient) -> None:
    first = await http.post(
        "/agents/refund/runs", json={"input": {"order_id": "o_1"}}, headers={"accept": "text/event-stream"}
    )
    assert first.status_code == 200 and first.headers["content-type"].startswith("text/event-stream")
    events = sse(first.text)
    assert [e["type"] for e in events] == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_INTERRUPTED"]
    interrupt = events[-1]["interrupt"]
    assert interrupt["name"] == "approve-refund" and interrupt["answerSchema"]["required"] == ["approved"]
    run_id = first.headers["x-run-id"]
    second = await http.post(
        f"/runs/{run_id}/resume", json={"answer": {"approved": True}}, headers={"accept": "text/event-stream"}
    )
    more = sse(second.text)
    assert [e["type"] for e in more] == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
    assert [e["seq"] for e in events + more] == list(range(1, 9)) and more[-1]["result"] == "refunded"


async def test_events_resume_from_last_event_id_or_after(http: httpx.AsyncClient) -> None:
    parked = await start_parked(http)
    whole = sse((await http.get(f"/runs/{parked['id']}/events")).text)
    from_header = sse((await http.get(f"/runs/{parked['id']}/events", headers={"last-event-id": "2"})).text)
    from_query = sse((await http.get(f"/runs/{parked['id']}/events?after=3")).text)
    assert [e["seq"] for e in whole] == [1, 2, 3, 4]
    assert from_header == whole[2:] and from_query == whole[3:]


async def test_records_list_get_cancel_delete(http: httpx.AsyncClient) -> None:
    parked = await start_parked(http)
    queued = await http.post("/agents/refund/runs", json={"input": {"order_id": "o_2"}})
    assert queued.status_code == 202 and queued.json()["status"] == "running"
    await http.app.engine.wait(queued.json()["id"])  # type: ignore[attr-defined]
    inbox = (await http.get("/runs?status=interrupted&limit=1")).json()
    assert len(inbox["runs"]) == 1 and inbox["next_cursor"] is not None
    got = (await http.get(f"/runs/{parked['id']}")).json()
    assert got["status"] == "interrupted" and "lease_owner" not in got
    assert (await http.delete(f"/runs/{parked['id']}")).status_code == 409
    cancelled = await http.post(f"/runs/{parked['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert (await http.delete(f"/runs/{parked['id']}")).status_code == 204
    assert (await http.get(f"/runs/{parked['id']}")).status_code == 404


async def test_manifest(http: httpx.AsyncClient) -> None:
    manifest = (await http.get("/agents")).json()
    refund = next(agent for agent in manifest["agents"] if agent["name"] == "refund")
    assert refund["framework"] == "plain" and refund["input_schema"]["required"] == ["order_id"]
    assert refund["description"] == "Refunds an order after a human approves it."


BAD = [
    # (what, method, path, kwargs, status, code)
    (
        "malformed JSON",
        "POST",
        "/agents/refund/runs",
        {"content": b"{nope", "headers": {"content-type": "application/json"}},
        400,
        "bad_request",
    ),
    (
        "wrong content type",
        "POST",
        "/agents/refund/runs",
        {"content": b"input=1", "headers": {"content-type": "text/plain"}},
        415,
        "unsupported_media_type",
    ),
    (
        "oversized body",
        "POST",
        "/agents/refund/runs",
        {"json": {"input": {"order_id": "x" * 2_000_000}}},
        413,
        "payload_too_large",
    ),
    ("a JSON array", "POST", "/agents/refund/runs", {"json": [1]}, 400, "bad_request"),
    ("unknown field", "POST", "/agents/refund/runs", {"json": {"inputs": {}}}, 400, "bad_request"),
    ("unknown agent", "POST", "/agents/nope/runs", {"json": {"input": {}}}, 404, "agent_not_found"),
    (
        "unknown agent, streamed",
        "POST",
        "/agents/nope/runs",
        {"json": {"input": {}}, "headers": {"accept": "text/event-stream"}},
        404,
        "agent_not_found",
    ),
    (
        "input that fails the schema",
        "POST",
        "/agents/refund/runs",
        {"json": {"input": {"order": 1}}},
        422,
        "invalid_input",
    ),
    ("unknown run id", "GET", "/runs/run_missing", {}, 404, "run_not_found"),
    ("events of an unknown run", "GET", "/runs/run_missing/events", {}, 404, "run_not_found"),
    ("bad status filter", "GET", "/runs?status=parked", {}, 422, "invalid_argument"),
    ("bad limit", "GET", "/runs?limit=0", {}, 422, "invalid_argument"),
    ("continue without the secret", "POST", "/__agent-unit/continue", {"json": {"run_id": "x"}}, 401, "unauthorized"),
    (
        "sweep with a wrong secret",
        "POST",
        "/__agent-unit/sweep",
        {"headers": {"authorization": "Bearer nope"}},
        401,
        "unauthorized",
    ),
    ("unknown route", "GET", "/nowhere", {}, 404, "not_found"),
    ("wrong method", "PUT", "/runs", {}, 405, "method_not_allowed"),
]


@pytest.mark.parametrize(("what", "method", "path", "kwargs", "status", "code"), BAD, ids=[row[0] for row in BAD])
async def test_bad_requests_get_a_clear_error_and_change_nothing(
    http: httpx.AsyncClient, what: str, method: str, path: str, kwargs: dict[str, Any], status: int, code: str
) -> None:
    parked = await start_parked(http)
    response = await http.request(method, path, **kwargs)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["message"] and "Traceback" not in response.text
    after = (await http.get(f"/runs/{parked['id']}")).json()
    assert after == parked
    assert len((await http.get("/runs")).json()["runs"]) == 1  # no run was created


async def test_resume_errors_leave_the_run_parked(http: httpx.AsyncClient) -> None:
    parked = await start_parked(http)
    wrong = await http.post(f"/runs/{parked['id']}/resume", json={"answer": {"approved": "maybe"}})
    assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "invalid_answer"
    assert wrong.json()["error"]["details"][0]["loc"] == ["approved"]
    assert (await http.get(f"/runs/{parked['id']}")).json() == parked
    bad_id = await http.get(f"/runs/{parked['id']}/events", headers={"last-event-id": "abc"})
    assert bad_id.status_code == 422 and "Last-Event-ID" in bad_id.json()["error"]["message"]
    done = await http.post(f"/runs/{parked['id']}/resume?wait=1", json={"answer": {"approved": True}})
    assert done.status_code == 200 and done.json()["output"] == "refunded"
    again = await http.post(f"/runs/{parked['id']}/resume", json={"answer": {"approved": True}})
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_interrupted"


async def test_internal_endpoints_with_the_secret(http: httpx.AsyncClient) -> None:
    swept = await http.post("/__agent-unit/sweep", headers={"authorization": "Bearer s3cret"})
    assert swept.status_code == 200 and swept.json() == {"woken": 0, "recovered": 0, "deleted": 0}


async def test_internal_endpoints_refused_in_production_without_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_UNIT_ENV", "production")
    monkeypatch.delenv("AGENT_UNIT_SECRET", raising=False)
    app = create_agent_unit(AGENTS, store="memory://")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as client:
        response = await client.post("/__agent-unit/sweep")
    assert response.status_code == 401 and "AGENT_UNIT_SECRET" in response.json()["error"]["message"]


async def test_authorize_hook_sees_action_and_run_and_guards_every_route() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def authorize(request: Request, action: str, run: dict[str, Any]) -> bool:
        seen.append((action, run))
        if request.headers.get("authorization") != "Bearer user":
            from agent_unit.errors import Unauthorized

            raise Unauthorized("sign in first")
        return run.get("thread_id") in (None, "t-user")

    app = create_agent_unit(AGENTS, store="memory://", authorize=authorize)
    transport = httpx.ASGITransport(app=app)
    async with fetch.AsyncClient(
        transport=transport, base_url="http://unit", headers={"authorization": "Bearer user"}
    ) as user:
        mine = await user.post("/agents/refund/runs?wait=1", json={"input": {"order_id": "o"}, "thread_id": "t-user"})
        assert mine.status_code == 200
        other = await user.post("/agents/refund/runs", json={"input": {"order_id": "o"}, "thread_id": "t-other"})
        assert other.status_code == 403 and other.json()["error"]["code"] == "forbidden"
        assert (await user.get(f"/runs/{mine.json()['id']}")).status_code == 200
    async with httpx.AsyncClient(transport=transport, base_url="http://unit") as anonymous:
        for method, path in [
            ("GET", "/agents"),
            ("GET", "/runs"),
            ("GET", f"/runs/{mine.json()['id']}"),
            ("POST", f"/runs/{mine.json()['id']}/cancel"),
        ]:
            response = await anonymous.request(method, path)
            assert response.status_code == 401, path
    assert (await app.engine.get(mine.json()["id"])).status == "interrupted"
    actions = {action for action, _ in seen}
    assert {"start", "get", "manifest", "list", "cancel"} <= actions
    assert ("get", {"id": mine.json()["id"], "agent": "refund", "thread_id": "t-user"}) in seen
    await app.engine.aclose()


async def test_mounts_inside_an_existing_app_without_a_lifespan() -> None:
    unit = create_agent_unit(AGENTS, store="memory://")
    parent = Starlette(routes=[Mount("/api/agents", unit)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=parent), base_url="http://host") as http:
        started = await http.post("/api/agents/agents/refund/runs?wait=1", json={"input": {"order_id": "o"}})
        assert started.status_code == 200
        assert (await http.get(f"/api/agents/runs/{started.json()['id']}")).json()["status"] == "interrupted"
    await unit.engine.aclose()


async def test_base_path() -> None:
    app = create_agent_unit(AGENTS, store="memory://", base_path="/api/agents/")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host") as http:
        assert (await http.get("/api/agents/agents")).status_code == 200
        assert (await http.get("/agents")).status_code == 404
    await app.engine.aclose()


async def test_client_over_asgi_returns_typed_records_and_raises_typed_errors() -> None:
    app = create_agent_unit(AGENTS, store="memory://")
    async with AgentClient("http://unit", transport=httpx.ASGITransport(app=app)) as agents:
        events = [event async for event in agents.run("refund", {"order_id": "o"})]
        assert all(isinstance(event, RunEvent) for event in events)
        run_id = events[-1].data["runId"]
        assert events[-1].type == "RUN_INTERRUPTED" and events[-1].data["interrupt"]["name"] == "approve-refund"
        parked = await agents.get(run_id)
        assert isinstance(parked, RunRecord) and parked.status == RunStatus.interrupted
        assert parked.interrupt is not None and parked.interrupt.name == "approve-refund"
        with pytest.raises(InvalidAnswer) as caught:
            [event async for event in agents.resume(run_id, {"approved": "?"})]
        assert caught.value.code == "invalid_answer" and caught.value.status == 422
        finished = [event async for event in agents.resume(run_id, {"approved": True})]
        assert finished[-1].type == "RUN_FINISHED" and finished[-1].data["result"] == "refunded"
        with pytest.raises(NotInterrupted):
            [event async for event in agents.resume(run_id, True)]
        with pytest.raises(RunNotFound):
            await agents.get("run_missing")
        page = await agents.list(status="completed")
        assert isinstance(page, RunPage) and [run.id for run in page.runs] == [run_id]
        assert (await agents.get(run_id)).output == "refunded"
        replay = [event async for event in agents.events(run_id, after=4)]
        assert [e.seq for e in replay] == [5, 6, 7, 8]
        manifest = await agents.agents()
        assert "refund" in [agent.name for agent in manifest.agents]
    await app.engine.aclose()


async def test_a_resume_stream_says_where_it_starts(http: httpx.AsyncClient) -> None:
    parked = await start_parked(http)
    response = await http.post(
        f"/runs/{parked['id']}/resume", json={"answer": {"approved": True}}, headers={"accept": "text/event-stream"}
    )
    assert response.headers["x-stream-after"] == "4" and sse(response.text)[0]["seq"] == 5


async def test_json_nested_too_deep_is_a_400_not_a_500() -> None:
    from agent_unit import create_agent_unit

    from ..support.http_agents import AGENTS

    app = create_agent_unit(AGENTS, store="memory://")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        deep = "[" * 100_000 + "]" * 100_000
        response = await http.post("/agents/refund/runs", content=deep, headers={"content-type": "application/json"})
        assert response.status_code == 400
    await app.engine.aclose()


async def test_a_caller_who_may_not_act_learns_nothing_of_which_runs_exist() -> None:
    from agent_unit import create_agent_unit

    from ..support.http_agents import AGENTS

    def authorize(request: Any, action: str, run: dict[str, Any]) -> bool:
        return request.headers.get("authorization") == "Bearer admin"

    app = create_agent_unit(AGENTS, store="memory://", authorize=authorize)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        admin = {"authorization": "Bearer admin"}
        run = (await http.post("/agents/refund/runs?wait=1", json={"input": {"order_id": "o_1"}}, headers=admin)).json()
        assert (await http.get(f"/runs/{run['id']}")).status_code == 403
        assert (await http.get("/runs/run_does_not_exist")).status_code == 403  # the same answer: no existence leak
        assert (await http.get("/runs/run_does_not_exist", headers=admin)).status_code == 404
    await app.engine.aclose()


# -- hardening: cross-site writes, authorize first, every bad input a 4xx ----------------------

FOREIGN = "https://evil.example"
# What a page on another site can send without a CORS preflight: the body is JSON all the same.
CROSS_SITE_TYPES = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _a2a_message(parts: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"messageId": "m1", "role": "ROLE_USER", "parts": parts, **fields}


def _ag_ui(**fields: Any) -> dict[str, Any]:
    return {"threadId": "t1", "runId": "r1", "messages": [], "state": {}, "tools": [], "context": [], **fields}


async def _runs(http: httpx.AsyncClient) -> list[tuple[str, str, int]]:
    page = (await http.get("/runs")).json()["runs"]
    return sorted((run["id"], run["status"], run["version"]) for run in page)


def _state_changing_requests(parked: str, finished: str) -> list[tuple[str, str, Any]]:
    """Every route that changes state, each with a body that would change it if it were accepted."""
    approve = {"data": {"approved": True}}
    return [
        ("POST", "/agents/refund/runs", {"input": {"order_id": "o_9"}}),
        ("POST", f"/runs/{parked}/resume", {"answer": {"approved": True}}),
        ("POST", f"/runs/{parked}/cancel", {}),
        ("DELETE", f"/runs/{finished}", {}),
        ("POST", "/mcp", _rpc("tools/call", {"name": "refund", "arguments": {"order_id": "o_9"}})),
        ("POST", "/a2a", _rpc("SendMessage", {"message": _a2a_message([{"data": {"order_id": "o_9"}}])})),
        ("POST", "/a2a", _rpc("SendMessage", {"message": _a2a_message([approve], taskId=parked)})),
        ("POST", "/agents/refund/ag-ui", _ag_ui(forwardedProps={"input": {"order_id": "o_9"}})),
        ("POST", "/agents/refund/ag-ui", _ag_ui(resume=[{"interruptId": f"{parked}:x", "status": "cancelled"}])),
        ("POST", "/__agent-unit/continue", {"run_id": parked}),
        ("POST", "/__agent-unit/sweep", {}),
    ]


async def _parked_and_finished(http: httpx.AsyncClient) -> tuple[str, str]:
    """A refund parked for approval and one declined (finished): the targets of the routes above."""
    parked = (await start_parked(http))["id"]
    finished = (await start_parked(http))["id"]
    await http.post(f"/runs/{finished}/resume?wait=1", json={"answer": {"approved": False}})
    return parked, finished


@pytest.mark.parametrize("content_type", CROSS_SITE_TYPES)
async def test_no_state_changing_route_takes_a_body_another_site_could_send(content_type: str) -> None:
    # no secret (as in development): only the content type stands between a page and the routes
    app = create_agent_unit({"refund": AGENTS["refund"]}, store="memory://", public_url="http://unit")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        parked, finished = await _parked_and_finished(http)
        before = await _runs(http)
        for method, path, body in _state_changing_requests(parked, finished):
            headers = {"content-type": content_type, "origin": FOREIGN}
            response = await http.request(method, path, content=json.dumps(body), headers=headers)
            assert response.status_code in (403, 415), (path, response.status_code, response.text)
            assert await _runs(http) == before, path  # no run created, the parked run still parked
    await app.engine.aclose()


async def test_no_state_changing_route_takes_a_bodyless_request_from_another_site() -> None:
    # A page can POST with no body and no content type, without a preflight: only Origin tells.
    app = create_agent_unit({"refund": AGENTS["refund"]}, store="memory://", public_url="http://unit")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        parked, finished = await _parked_and_finished(http)
        before = await _runs(http)
        for method, path, _ in _state_changing_requests(parked, finished):
            response = await http.request(method, path, headers={"origin": FOREIGN, "sec-fetch-site": "cross-site"})
            assert response.status_code == 403, (path, response.status_code, response.text)
            assert response.json()["error"]["code"] == "forbidden_origin", path
            assert await _runs(http) == before, path
        # the deployment's own pages (the inbox) are served from the host the request is sent to
        own = await http.post(
            f"/runs/{parked}/cancel", headers={"origin": "https://unit", "sec-fetch-site": "same-origin"}
        )
        assert own.status_code == 200 and own.json()["status"] == "cancelled"
    await app.engine.aclose()


def _deny_all(request: Request, action: str, run: dict[str, Any]) -> bool:
    return False


def _sign_in_first(request: Request, action: str, run: dict[str, Any]) -> bool:
    from agent_unit.errors import Unauthorized

    raise Unauthorized("sign in first")


@pytest.mark.parametrize(("hook", "status"), [(_deny_all, 403), (_sign_in_first, 401)])
async def test_a_caller_refused_everything_learns_nothing_from_any_route(hook: Any, status: int) -> None:
    app = create_agent_unit(AGENTS, store="memory://", public_url="http://unit", authorize=hook)
    admin_app = create_agent_unit(engine=app.engine)  # the same runs, no hook: to park one
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=admin_app), base_url="http://unit") as admin:
        parked = (await start_parked(admin))["id"]
        before = await _runs(admin)
    json_type = {"content-type": "application/json"}
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", "/agents", {}),
        ("GET", "/.well-known/agent-card.json", {}),
        ("GET", "/runs", {}),
        ("GET", "/runs?limit=0", {}),
        ("GET", "/runs?cursor=nope", {}),
        ("GET", f"/runs/{parked}", {}),
        ("GET", "/runs/run_missing", {}),
        ("GET", f"/runs/{parked}/events", {"headers": {"last-event-id": "x"}}),
        ("GET", "/runs/run_missing/events", {}),
        ("POST", f"/runs/{parked}/resume", {"json": {"answer": {"approved": True}}}),
        ("POST", f"/runs/{parked}/resume", {"content": b"{nope", "headers": json_type}),
        ("POST", "/runs/run_missing/resume", {"json": {"answer": True}}),
        ("POST", f"/runs/{parked}/cancel", {}),
        ("POST", "/runs/run_missing/cancel", {"content": b"x", "headers": {"content-type": "text/plain"}}),
        ("DELETE", f"/runs/{parked}", {}),
        ("DELETE", "/runs/run_missing", {}),
    ]
    for agent in ("refund", "nope"):  # a real agent and an unknown one
        requests += [
            ("POST", f"/agents/{agent}/runs", {"json": {"input": {"order_id": "o"}}}),
            ("POST", f"/agents/{agent}/runs", {"json": {"input": {"order": 1}}}),
            ("POST", f"/agents/{agent}/runs", {"json": {"inputs": 1}}),
            ("POST", f"/agents/{agent}/runs", {"json": [1]}),
            ("POST", f"/agents/{agent}/runs", {"content": b"{nope", "headers": json_type}),
            ("POST", f"/agents/{agent}/runs", {"content": b"{}", "headers": {"content-type": "text/plain"}}),
            ("POST", f"/agents/{agent}/runs", {"json": {"input": "x" * 2_000_000}}),
            ("POST", f"/agents/{agent}/ag-ui", {"json": _ag_ui(forwardedProps={"input": {"order_id": "o"}})}),
            ("POST", f"/agents/{agent}/ag-ui", {"json": {"threadId": 1}}),
            ("POST", f"/agents/{agent}/ag-ui", {"content": b"{nope", "headers": json_type}),
            ("POST", f"/agents/{agent}/ag-ui", {"json": _ag_ui(resume=[{"interruptId": "x", "status": "resolved"}])}),
            ("POST", "/mcp", {"json": _rpc("tools/call", {"name": agent, "arguments": {"order_id": "o"}})}),
            (
                "POST",
                "/a2a",
                {"json": _rpc("SendMessage", {"message": _a2a_message([{"text": "o"}], metadata={"skill": agent})})},
            ),
        ]
    requests += [
        ("POST", "/mcp", {"content": b"{nope", "headers": json_type}),
        ("POST", "/a2a", {"json": _rpc("SendMessage", {"message": _a2a_message([{"text": "o"}])})}),  # no skill
        ("POST", "/a2a", {"json": _rpc("SendMessage", {"message": {"parts": 1}})}),
        ("POST", "/a2a", {"json": _rpc("GetTask", {"id": parked})}),
        ("POST", "/a2a", {"json": _rpc("GetTask", {"id": "run_missing"})}),
        ("POST", "/a2a", {"json": _rpc("GetTask", {})}),
        ("POST", "/a2a", {"json": _rpc("tasks/explode", {})}),
        ("POST", "/a2a", {"content": b"{nope", "headers": json_type}),
        ("POST", "/a2a", {"content": b"{}", "headers": {"content-type": "text/plain"}}),
    ]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        for method, path, kwargs in requests:
            response = await http.request(method, path, **kwargs)
            assert response.status_code == status, (method, path, kwargs.get("json"), response.text[:300])
            assert response.json()["error"]["code"] in ("forbidden", "unauthorized")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=admin_app), base_url="http://unit") as admin:
        assert await _runs(admin) == before
    await app.engine.aclose()


@pytest.mark.parametrize(
    "value",
    [
        "²",  # str.isdigit() accepts it, int() does not
        "\u0661\u0662",  # Arabic-Indic digits: the same
        str(2**63),  # past SQLite's signed 64-bit integers: once a 200 whose stream was then cut
        "9" * 40,
        "9" * 5000,  # past the digits int() converts
    ],
)
async def test_a_last_event_id_that_is_no_seq_is_a_422_never_a_cut_stream(tmp_path: Any, value: str) -> None:
    app = create_agent_unit(AGENTS, store=f"sqlite:///{tmp_path / 'runs.db'}")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        parked = await start_parked(http)
        responses = [await http.get(f"/runs/{parked['id']}/events", params={"after": value})]
        if len(value) < 100 and (value.isascii() or value == "²"):  # what a header can carry (latin-1)
            header = {"last-event-id": value.encode("latin-1")}
            responses.append(await http.get(f"/runs/{parked['id']}/events", headers=header))
        for response in responses:
            assert response.status_code == 422, response.text
            assert "whole number" in response.json()["error"]["message"]
        last = await http.get(f"/runs/{parked['id']}/events", params={"after": str(2**63 - 1)})
        assert last.status_code == 200 and sse(last.text) == []  # the largest seq is still a seq
    await app.engine.aclose()


async def test_a_cursor_that_no_page_gave_is_a_422_not_an_empty_page(http: httpx.AsyncClient) -> None:
    await start_parked(http)
    for cursor in ["nope", "run_", "run_zzzzzzzzzzzzzzzzzzzzzzzzzzzz", "thread_0123456789abcdefghjkmnpqrs"]:
        response = await http.get("/runs", params={"cursor": cursor})
        assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_argument", cursor
        assert "next_cursor" in response.json()["error"]["message"]
    first = (await http.get("/runs?limit=1")).json()
    await start_parked(http)
    assert (await http.get("/runs", params={"limit": 1, "cursor": first["runs"][0]["id"]})).status_code == 200


def _lone(body: dict[str, Any]) -> str:
    """``body`` as JSON with each ``@`` written as half a surrogate pair: valid JSON, not valid Unicode."""
    return json.dumps(body).replace("@", "\\ud800")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/agents/refund/runs", _lone({"input": {"order_id": "@"}})),
        ("/agents/refund/runs", _lone({"input": {"order_id": "o"}, "thread_id": "@"})),
        ("/agents/refund/runs", _lone({"input": {"@": 1, "order_id": "o"}})),
        ("/runs/{id}/resume", _lone({"answer": {"approved": True, "note": "@"}})),
    ],
)
async def test_a_lone_surrogate_in_a_body_is_a_400_and_changes_nothing(
    http: httpx.AsyncClient, path: str, body: str
) -> None:
    parked = await start_parked(http)
    before = await _runs(http)
    headers = {"content-type": "application/json"}
    response = await http.post(path.format(id=parked["id"]), content=body, headers=headers)
    assert response.status_code == 400 and "surrogate" in response.json()["error"]["message"], response.text
    assert await _runs(http) == before
    pair = await http.post(
        "/agents/refund/runs?wait=1", content='{"input": {"order_id": "\\ud83d\\ude00"}}', headers=headers
    )
    assert pair.status_code == 200 and pair.json()["input"] == {"order_id": "\U0001f600"}  # a whole pair is fine


@define_agent(description="Emits a string no UTF-8 encoder takes.")
async def odd(input: str, run: Run) -> str:
    await run.emit("odd", "\ud800")
    return "\udfff"


async def test_a_value_holding_a_lone_surrogate_fails_its_run_cleanly_on_every_protocol() -> None:
    # No store keeps such a value (the memory store included): the run fails once with a message
    # that names it, and every JSON body and stream says so whole, never a 500 or a cut stream.
    app = create_agent_unit({"odd": odd}, store="memory://", public_url="http://unit")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        started = await http.post("/agents/odd/runs?wait=1", json={"input": "x"})
        assert started.status_code == 200 and started.json()["status"] == "failed", started.text
        assert "lone surrogate" in started.json()["error"]["message"]
        events = sse((await http.get(f"/runs/{started.json()['id']}/events")).text)
        assert events[-1]["type"] == "RUN_ERROR" and "lone surrogate" in events[-1]["message"]
        ag_ui = await http.post("/agents/odd/ag-ui", json=_ag_ui(forwardedProps={"input": "x"}))
        assert ag_ui.status_code == 200 and "RUN_ERROR" in ag_ui.text and "lone surrogate" in ag_ui.text
        message = _a2a_message([{"text": "x"}])
        a2a = await http.post("/a2a", json=_rpc("SendStreamingMessage", {"message": message}))
        assert a2a.status_code == 200 and "TASK_STATE_FAILED" in a2a.text and "INTERNAL" not in a2a.text
    await app.engine.aclose()


async def test_a_content_length_too_long_for_int_is_a_413_not_a_500(http: httpx.AsyncClient) -> None:
    # in process only: a real server's HTTP parser refuses such a header before the app sees it
    headers = {"content-type": "application/json", "accept": "application/json", "content-length": "9" * 5000}
    for path in ("/agents/refund/runs", "/agents/refund/ag-ui", "/mcp"):
        response = await http.post(path, content=b"{}", headers=headers)
        assert response.status_code == 413 and response.json()["error"]["code"] == "payload_too_large", path
    a2a = await http.post("/a2a", content=b"{}", headers=headers)
    assert a2a.json()["error"]["code"] == -32600 and "max_body_bytes" in a2a.json()["error"]["message"]


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/runs/{long}"),
        ("GET", "/runs/{long}/events"),
        ("POST", "/runs/{long}/cancel"),
        ("POST", "/agents/{long}/runs"),
    ],
)
async def test_a_huge_id_in_a_request_is_not_echoed_back_whole(http: httpx.AsyncClient, method: str, path: str) -> None:
    long = "r" * 10_000
    response = await http.request(method, path.format(long=long), json={"input": {"order_id": "o"}})
    assert 400 <= response.status_code < 500
    message = response.json()["error"]["message"]
    assert len(message) < 300 and "10,002 characters" in message, message


async def test_following_a_finished_run_ends_after_its_last_event(http: httpx.AsyncClient) -> None:
    parked = await start_parked(http)
    done = await http.post(f"/runs/{parked['id']}/resume?wait=1", json={"answer": {"approved": True}})
    assert done.json()["status"] == "completed"
    with anyio.fail_after(10):  # a stream that never closed would hang here
        response = await http.get(f"/runs/{parked['id']}/events?follow=1")
    assert [e["type"] for e in sse(response.text)][-1] == "RUN_FINISHED"


async def test_a_follower_of_a_parked_run_stays_until_the_run_ends(http: httpx.AsyncClient) -> None:
    parked = await start_parked(http)

    async def follow() -> list[str]:
        response = await http.get(f"/runs/{parked['id']}/events?follow=1")
        return [e["type"] for e in sse(response.text)]

    with anyio.fail_after(10):
        follower = asyncio.ensure_future(follow())
        await asyncio.sleep(0.3)
        assert not follower.done()  # parked: a follower waits for more
        await http.post(f"/runs/{parked['id']}/resume", json={"answer": {"approved": True}})
        seen = await follower
    assert seen[-1] == "RUN_FINISHED" and "RUN_INTERRUPTED" in seen


@pytest.mark.parametrize("wait", ["?wait=1", ""])
async def test_a_resume_over_http_reads_the_run_record_once(http: httpx.AsyncClient, wait: str) -> None:
    parked = await start_parked(http)
    store = http.app.engine.store  # type: ignore[attr-defined]
    reads: list[str] = []
    load_run = store.load_run

    async def counted(run_id: str) -> Any:
        reads.append(run_id)
        return await load_run(run_id)

    store.load_run = counted  # on this instance only: the store itself answers
    try:
        resumed = await http.post(f"/runs/{parked['id']}/resume{wait}", json={"answer": {"approved": True}})
    finally:
        del store.load_run
    await http.app.engine.wait(parked["id"])  # type: ignore[attr-defined]
    assert resumed.status_code == (200 if wait else 202)
    assert resumed.json()["status"] == ("completed" if wait else "running")
    assert reads == [parked["id"]]
    done = (await http.get(f"/runs/{parked['id']}")).json()
    assert done["status"] == "completed" and done["output"] == "refunded"
    if wait:
        assert resumed.json() == done


async def test_a_stream_sends_the_events_it_read_before_it_reads_the_run(http: httpx.AsyncClient) -> None:
    """The first event of a started run (RUN_STARTED, stored with the run) goes out before the
    stream reads the run's status: on an idle server that read (a record parsed) cost ~0.1 ms
    of the ~1 ms from a request's bytes to its first event (``bench/http/first_event.py``)."""
    app = http.app  # type: ignore[attr-defined]
    store = app.engine.store
    order: list[str] = []
    load_run = store.load_run

    async def counted(run_id: str) -> Any:
        order.append("load_run")
        return await load_run(run_id)

    body = json.dumps({"input": {"order_id": "o_1"}}).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/agents/refund/runs",
        "raw_path": b"/agents/refund/runs",
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"unit"),
            (b"accept", b"text/event-stream"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("unit", 80),
    }
    received = False

    async def receive() -> dict[str, Any]:
        nonlocal received
        if received:
            await asyncio.Event().wait()  # no disconnect
        received = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and b"data:" in message.get("body", b""):
            order.append(json.loads(message["body"].split(b"data:", 1)[1])["type"])

    store.load_run = counted  # on this instance only: the store itself answers
    try:
        with anyio.fail_after(10):
            await app(scope, receive, send)
    finally:
        del store.load_run
    assert order[0] == "RUN_STARTED" and "load_run" in order, order
    assert [step for step in order if step != "load_run"][-1] == "RUN_INTERRUPTED"  # the whole stream, to the pause
