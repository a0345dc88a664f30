"""Who answered: a resume records the identity ``authorize`` returns (or the request's authenticated
user) and when, in the run record and its events; a deployment can refuse anonymous answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request

from agent_unit import create_agent_unit
from agent_unit.client import AgentClient

from ..support.http_agents import AGENTS


def as_header(request: Request, action: str, run: dict[str, Any]) -> bool | str:
    """Allows everyone; says who asks when the request names somebody."""
    return request.headers.get("x-user") or True


async def client_for(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit")


@pytest.fixture
async def unit() -> AsyncIterator[Any]:
    app = create_agent_unit(AGENTS, store="memory://", authorize=as_header)
    yield app
    await app.engine.aclose()


async def parked(http: httpx.AsyncClient) -> str:
    response = await http.post("/agents/refund/runs?wait=1", json={"input": {"order_id": "o_1"}})
    assert response.json()["status"] == "interrupted"
    return str(response.json()["id"])


async def test_a_resume_records_the_identity_authorize_returned_and_when(unit: Any) -> None:
    async with await client_for(unit) as http:
        run_id = await parked(http)
        done = await http.post(
            f"/runs/{run_id}/resume?wait=1",
            json={"answer": {"approved": True}},
            headers={"x-user": "alice@example.com"},
        )
        record = done.json()
        assert record["status"] == "completed"
        [answer] = record["answers"]
        assert answer["by"] == "alice@example.com" and answer["interrupt"] == "approve-refund"
        assert answer["at"] and answer["expired"] is False
        client = AgentClient("http://unit", transport=httpx.ASGITransport(app=unit))
        started = [event.data async for event in client.events(run_id) if event.type == "RUN_STARTED"]
        await client.aclose()
        assert "answered" not in started[0]["metadata"]["agent-unit"]  # the start answered nothing
        answered = started[1]["metadata"]["agent-unit"]["answered"]
        at = datetime.fromisoformat(answered.pop("at"))
        assert answered == {"name": "approve-refund", "key": answer["key"], "by": "alice@example.com"}
        assert at == datetime.fromisoformat(answer["at"])


async def test_an_answer_from_nobody_known_is_recorded_as_anonymous_unless_the_deployment_requires_one() -> None:
    open_unit = create_agent_unit(AGENTS, store="memory://", authorize=as_header)
    async with await client_for(open_unit) as http:
        run_id = await parked(http)
        done = (await http.post(f"/runs/{run_id}/resume?wait=1", json={"answer": {"approved": True}})).json()
        assert done["answers"][0]["by"] is None
    await open_unit.engine.aclose()

    strict = create_agent_unit(AGENTS, store="memory://", authorize=as_header, require_answerer=True)
    async with await client_for(strict) as http:
        run_id = await parked(http)
        refused = await http.post(f"/runs/{run_id}/resume", json={"answer": {"approved": True}})
        assert refused.status_code == 401 and "records who answers" in refused.json()["error"]["message"]
        assert (await http.get(f"/runs/{run_id}")).json()["status"] == "interrupted"  # still waiting
        done = await http.post(
            f"/runs/{run_id}/resume?wait=1", json={"answer": {"approved": True}}, headers={"x-user": "bob"}
        )
        assert done.json()["answers"][0]["by"] == "bob"
    await strict.engine.aclose()


class HeaderAuth(AuthenticationBackend):
    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser] | None:
        name = conn.headers.get("x-login")
        return None if name is None else (AuthCredentials(["authenticated"]), SimpleUser(name))


async def test_the_requests_authenticated_user_answers_when_authorize_names_nobody() -> None:
    inner = create_agent_unit(AGENTS, store="memory://", require_answerer=True)
    app = AuthenticationMiddleware(inner, backend=HeaderAuth())
    async with await client_for(app) as http:
        run_id = await parked(http)
        done = await http.post(
            f"/runs/{run_id}/resume?wait=1", json={"answer": {"approved": False}}, headers={"x-login": "carol"}
        )
        assert done.status_code == 200 and done.json()["answers"][0]["by"] == "carol"
    await inner.engine.aclose()
