"""``HostGuard``: agent-unit's Host and Origin checks in front of an app that is not agent-unit's.

A DNS-rebinding page (``Host: attacker.example``) or a foreign page's state-changing request
never reaches the app behind the guard, on HTTP and WebSocket alike; the app's own requests,
its reads and its lifespan pass untouched. The guard decides every request as agent-unit's
own routes decide it: one check, the same answers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocket, WebSocketDisconnect

from agent_unit import create_agent_unit
from agent_unit.http import HostGuard

from ..support.http_agents import AGENTS

OWN = "https://agents.example.com"
ATTACKER = "attacker.example:8701"


def payouts_app(paid: list[str], events: list[str]) -> Starlette:
    """An app that is not agent-unit's: a read, a payout, a socket, and a lifespan."""

    async def balance(request: Request) -> JSONResponse:
        return JSONResponse({"balance": 100 - 10 * len(paid)})

    async def pay(request: Request) -> JSONResponse:
        paid.append(request.headers.get("host", ""))
        return JSONResponse({"paid": True})

    async def live(socket: WebSocket) -> None:
        await socket.accept()
        await socket.send_text("hello")
        await socket.close()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        events.append("started")
        yield
        events.append("stopped")

    routes = [Route("/balance", balance), Route("/pay", pay, methods=["POST"]), WebSocketRoute("/live", live)]
    return Starlette(routes=routes, lifespan=lifespan)


async def test_a_rebinding_host_and_a_foreign_pages_post_never_reach_the_app() -> None:
    paid: list[str] = []
    guarded = HostGuard(payouts_app(paid, []), public_url=OWN, allowed_origins=["https://app.example.com"])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guarded), base_url=OWN) as http:
        rebound = {"host": ATTACKER, "origin": f"http://{ATTACKER}"}
        for method, path in [("POST", "/pay"), ("GET", "/balance"), ("PUT", "/pay")]:
            refused = await http.request(method, path, headers=rebound)
            assert refused.status_code == 421, (method, path, refused.text)
            assert refused.json()["error"]["code"] == "forbidden_host"
            assert "attacker.example" in refused.json()["error"]["message"]
        foreign = await http.post("/pay", headers={"origin": "https://evil.example"})
        assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "forbidden_origin"
        assert "allowed_origins" in foreign.json()["error"]["message"]
        null = await http.post("/pay", headers={"origin": "null"})  # a sandboxed frame or a file: page
        assert null.status_code == 403
        assert paid == []
        # the app's own requests: no Origin (not a browser), its own pages, a listed one, loopback, reads
        assert (await http.post("/pay")).json() == {"paid": True}
        assert (await http.post("/pay", headers={"origin": OWN})).status_code == 200
        assert (await http.post("/pay", headers={"origin": "https://app.example.com"})).status_code == 200
        assert (await http.post("/pay", headers={"origin": "http://localhost:5173"})).status_code == 200
        assert (await http.get("/balance", headers={"origin": "https://evil.example"})).status_code == 200
        for host in ["agents.example.com", "127.0.0.1:3000", "[::1]:3000", "localhost:3000"]:
            assert (await http.get("/balance", headers={"host": host})).status_code == 200, host
    assert len(paid) == 4


def test_a_websocket_from_a_foreign_page_or_host_is_closed_before_the_app_accepts_it() -> None:
    events: list[str] = []
    guarded = HostGuard(payouts_app([], events), public_url=OWN, allowed_hosts=["testserver"])  # the client's name
    with TestClient(guarded, base_url=OWN) as client:
        assert events == ["started"]  # the app's lifespan passes through the guard
        for headers in [{"origin": "https://evil.example"}, {"host": ATTACKER}]:
            with pytest.raises(WebSocketDisconnect) as closed, client.websocket_connect("/live", headers=headers):
                pass
            assert closed.value.code == 1008, headers
            assert closed.value.reason == ("forbidden_host" if "host" in headers else "forbidden_origin")
        with client.websocket_connect("/live", headers={"origin": OWN}) as socket:
            assert socket.receive_text() == "hello"
    assert events == ["started", "stopped"]


def test_a_wrong_entry_is_refused_when_the_guard_is_made() -> None:
    with pytest.raises(ValueError, match=r"allowed_hosts: 'https://x\.example' is not a host name"):
        HostGuard(payouts_app([], []), allowed_hosts=["https://x.example"])
    with pytest.raises(ValueError, match=r"allowed_origins: 'app\.example\.com' is not an origin"):
        HostGuard(payouts_app([], []), allowed_origins=["app.example.com"])


@pytest.mark.parametrize(
    ("options", "base_url"),
    [
        ({"public_url": OWN}, OWN),
        ({"allowed_hosts": [".example.net"], "allowed_origins": ["https://app.example.com"]}, "http://a.example.net"),
        ({}, "http://127.0.0.1:8701"),  # a server on loopback that names nothing
        ({}, "http://10.0.0.7:3000"),  # a container on its network that names nothing
    ],
)
async def test_the_guard_answers_every_request_as_agent_units_own_routes_do(
    options: dict[str, Any], base_url: str
) -> None:
    own = create_agent_unit(AGENTS, store="memory://", **options)
    guarded = HostGuard(payouts_app([], []), **options)
    hosts = [None, "agents.example.com", "a.example.net", ATTACKER, "localhost:8701", "10.0.0.7:3000", "bad host"]
    origins = [None, OWN, "https://app.example.com", "http://attacker.example:8701", "http://10.0.0.7:3000", "null"]
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=own), base_url=base_url) as ours,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=guarded), base_url=base_url) as theirs,
    ):
        for host in hosts:
            for origin in origins:
                headers = {key: value for key, value in [("host", host), ("origin", origin)] if value is not None}
                body = json.dumps({"input": {"order_id": "o_1"}})
                mine = await ours.post("/agents/refund/runs", content=body, headers=headers | _json)
                guard = await theirs.post("/pay", headers=headers)
                expected = mine.status_code if mine.status_code in (403, 421) else 200
                assert guard.status_code == expected, (host, origin, mine.text, guard.text)
                if expected != 200:
                    assert guard.json() == mine.json(), (host, origin)
    await own.engine.aclose()


_json = {"content-type": "application/json"}
