"""The HTTP contract, in process (httpx over ASGI): routes, streams, errors, auth, limits."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from agent_unit import RunStatus, create_agent_unit
from agent_unit.client import AgentClient, RunEvent, RunPage, RunRecord
from agent_unit.errors import InvalidAnswer, NotInterrupted, RunNotFound

from .http_agents import AGENTS


def sse(text: str) -> list[dict[str, Any]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        if "data" in fields:
            events.append({"seq": int(fields["id"]), **json.loads(fields["data"])})
    return events


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
    async with httpx.AsyncClient(
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

    from .http_agents import AGENTS

    app = create_agent_unit(AGENTS, store="memory://")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        deep = "[" * 100_000 + "]" * 100_000
        response = await http.post("/agents/refund/runs", content=deep, headers={"content-type": "application/json"})
        assert response.status_code == 400
    await app.engine.aclose()


async def test_a_caller_who_may_not_act_learns_nothing_of_which_runs_exist() -> None:
    from agent_unit import create_agent_unit

    from .http_agents import AGENTS

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
