"""DNS rebinding: a request whose ``Host`` is not one of the deployment's names is refused.

A rebinding page lives at the attacker's domain, whose DNS then points at the server (often
loopback). The browser treats the server as the attacker's own origin: it sends
``Host: attacker.example`` and ``Origin: http://attacker.example``, and lets the page read the
answers. So every route but ``/healthz`` checks the Host, and ``Origin == Host`` proves
nothing for a Host the deployment does not list.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_unit import create_agent_unit
from agent_unit.http.hostnames import HostNames, arrived_at_loopback, host_name

from ..support import fetch
from ..support.http_agents import AGENTS
from ..support.server import Server

ATTACKER = "attacker.example:8701"
OWN = "https://agents.example.com"


def _rebinding(host: str = ATTACKER) -> dict[str, str]:
    """The headers a browser sends for a page of the attacker's domain, rebound to the server."""
    return {"host": host, "origin": f"http://{host}", "content-type": "application/json"}


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _attacks(parked: str) -> list[tuple[str, str, Any]]:
    """The reported attack (approve a parked run) on every protocol, and the reads a rebinding page could make."""
    approve = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": {"approved": True}}], "taskId": parked}
    ag_ui = {
        "threadId": "t1",
        "runId": "r1",
        "messages": [],
        "state": {},
        "tools": [],
        "context": [],
        "resume": [{"interruptId": f"{parked}:approve-refund", "status": "resolved", "payload": {"approved": True}}],
    }
    return [
        ("POST", f"/runs/{parked}/resume", {"answer": {"approved": True}}),
        ("POST", "/a2a", _rpc("SendMessage", {"message": approve})),
        ("POST", "/agents/refund/ag-ui", ag_ui),
        ("POST", "/mcp", _rpc("tools/call", {"name": "resume_run", "arguments": {"run_id": parked, "answer": {}}})),
        ("POST", f"/runs/{parked}/cancel", None),
        ("POST", "/agents/refund/runs", {"input": {"order_id": "o_9"}}),
        ("GET", "/runs", None),
        ("GET", f"/runs/{parked}", None),
        ("GET", f"/runs/{parked}/events", None),
        ("GET", "/agents", None),
        ("GET", "/.well-known/agent-card.json", None),
    ]


def _refused(response: httpx.Response, what: str) -> None:
    assert response.status_code == 421, (what, response.status_code, response.text)
    error = response.json()["error"]
    assert error["code"] == "forbidden_host", what
    assert "attacker.example" in error["message"] and "allowed_hosts" in error["message"], error


async def _parked(http: httpx.AsyncClient, **headers: str) -> str:
    response = await http.post("/agents/refund/runs?wait=1", json={"input": {"order_id": "o_1"}}, headers=headers)
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


# -- the names ----------------------------------------------------------------------------------


def test_the_names_a_deployment_answers_to() -> None:
    names = HostNames(OWN, ["api.example.org", ".example.net", "*.example.io"])
    assert names.known
    for host in [
        "agents.example.com",
        "Agents.Example.COM:443",
        "agents.example.com.",  # a fully qualified name
        "api.example.org:8080",
        "example.net",
        "a.b.example.net",
        "x.example.io",
        "localhost:3000",
        "app.localhost",
        "127.0.0.1:8701",
        "10.0.0.7",
        "[::1]:8701",
    ]:
        assert names.listed(host), host
    for host in [
        "attacker.example:8701",
        "example.io",  # "*." is for subdomains only
        "agents.example.com.attacker.example",
        "notexample.net",
        "localhost.attacker.example",
        "",
        None,
        "agents.example.com@attacker.example",
        "agents.example.com/x",
        "[not-an-address]",
        "agents.example.com:http",
    ]:
        assert not names.listed(host), host


def test_a_deployment_that_names_nothing_is_not_known_and_star_turns_the_check_off() -> None:
    assert not HostNames(None).known
    assert not HostNames("http://localhost:3000").known  # the listen address a server falls back to
    assert not HostNames("http://127.0.0.1:8701").known
    everything = HostNames(OWN, ["*"])
    assert everything.listed("attacker.example") and everything.allows("attacker.example", local=True)


def test_a_host_that_is_not_listed_is_refused_where_the_names_are_known_or_the_request_came_over_loopback() -> None:
    unknown = HostNames(None)
    assert unknown.allows("attacker.example", local=False)  # a container on 0.0.0.0: no name to hold it to
    assert not unknown.allows("attacker.example", local=True)
    assert unknown.allows("localhost:3000", local=True)
    assert not HostNames(OWN).allows("attacker.example", local=False)
    # no Host at all is no browser (HTTP/1.0, a platform's adapter): not a rebinding
    assert HostNames(OWN).allows(None, local=True) and HostNames(OWN).allows("", local=True)


@pytest.mark.parametrize(
    "entry",
    ["https://agents.example.com", "agents.example.com:8080", "agents.example.com/x", "", "*example.com", "a b"],
)
def test_an_entry_that_is_not_a_host_name_is_refused_with_what_to_write(entry: str) -> None:
    with pytest.raises(ValueError, match=r"allowed_hosts: .* is not a host name: write 'agents\.example\.com'"):
        HostNames(None, [entry])


def test_the_host_header_name() -> None:
    assert host_name("Agents.Example.com:443") == "agents.example.com"
    assert host_name("[::1]:80") == "::1"
    assert host_name("example.com.") == "example.com"
    assert host_name("a@b") is None and host_name("[x]") is None and host_name(None) is None


@pytest.mark.parametrize(
    ("server", "local"),
    [
        (("127.0.0.1", 8701), True),
        (("127.5.0.1", 8701), True),
        (("::1", 8701), True),
        (("::ffff:127.0.0.1", 8701), True),
        (("10.0.0.7", 3000), False),
        (("unit", 80), False),  # an in-process transport names the URL's host
        (None, False),  # a unix socket
    ],
)
def test_a_request_that_came_over_loopback(server: Any, local: bool) -> None:
    assert arrived_at_loopback({"type": "http", "server": server}) is local


# -- in process ---------------------------------------------------------------------------------


async def test_the_reported_attack_is_refused_on_every_route_of_a_deployment_with_a_url() -> None:
    app = create_agent_unit(AGENTS, store="memory://", public_url=OWN)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=OWN) as http:
        parked = await _parked(http)
        for method, path, body in _attacks(parked):
            content = None if body is None else json.dumps(body)
            _refused(await http.request(method, path, content=content, headers=_rebinding()), path)
        assert (await http.get(f"/runs/{parked}")).json()["status"] == "interrupted"
        assert len((await http.get("/runs")).json()["runs"]) == 1  # no run was started either
        # a load balancer's probe names the service or an address: /healthz answers whatever the Host
        assert (await http.get("/healthz", headers={"host": ATTACKER})).status_code == 200
        # the deployment's own name, loopback and addresses go on
        for host in ["agents.example.com", "localhost:8701", "127.0.0.1:8701", "[::1]:8701", "10.0.0.7"]:
            assert (await http.get("/runs", headers={"host": host})).status_code == 200, host
        own = await http.post(f"/runs/{parked}/resume?wait=1", json={"answer": {"approved": False}})
        assert own.status_code == 200 and own.json()["output"] == "declined"
    await app.engine.aclose()


async def test_allowed_hosts_are_the_deployments_names_too() -> None:
    app = create_agent_unit(AGENTS, store="memory://", allowed_hosts=["agents.internal", ".example.net"])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://agents.internal") as http:
        for host in ["agents.internal:3000", "example.net", "eu.example.net"]:
            assert (await http.get("/runs", headers={"host": host})).status_code == 200, host
        _refused(await http.get("/runs", headers={"host": ATTACKER}), "a name not listed")
        parked = await _parked(http)
        # the deployment's own pages (the inbox) send Origin == Host: a listed host may
        own = await http.post(f"/runs/{parked}/cancel", headers=_rebinding("eu.example.net"))
        assert own.status_code == 200 and own.json()["status"] == "cancelled"
    await app.engine.aclose()


async def test_a_request_over_loopback_is_held_to_the_names_even_when_none_is_configured() -> None:
    # what a server bound to 127.0.0.1 (or to all interfaces, reached over loopback) sees
    app = create_agent_unit(AGENTS, store="memory://")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8701") as http:
        parked = await _parked(http)
        for method, path, body in _attacks(parked):
            content = None if body is None else json.dumps(body)
            _refused(await http.request(method, path, content=content, headers=_rebinding()), path)
        assert (await http.get(f"/runs/{parked}")).json()["status"] == "interrupted"
        assert (await http.get("/runs", headers={"host": "localhost:8701"})).status_code == 200
    await app.engine.aclose()


async def test_where_no_name_is_known_origin_equal_to_host_proves_nothing() -> None:
    # A container on 0.0.0.0 with no url: any Host may reach it, but a page at a name it does
    # not list is a foreign page, even when the Host is that same name (a rebinding).
    app = create_agent_unit(AGENTS, store="memory://")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://10.0.0.7:3000") as http:
        parked = await _parked(http)
        response = await http.post(f"/runs/{parked}/resume", json={"answer": {"approved": True}}, headers=_rebinding())
        assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden_origin"
        assert "url" in response.json()["error"]["message"]
        assert (await http.get(f"/runs/{parked}")).json()["status"] == "interrupted"
        # a page served at the address it is reached at is its own
        own = await http.post(f"/runs/{parked}/cancel", headers=_rebinding("10.0.0.7:3000"))
        assert own.status_code == 200
    await app.engine.aclose()


# -- a real server on loopback ------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    running = Server("memory://").start()
    yield running
    running.stop()


def test_a_server_bound_to_loopback_refuses_a_rebinding_host_on_every_route(server: Server) -> None:
    with fetch.Client(base_url=server.url, timeout=30) as http:
        parked = http.post("/agents/refund/runs?wait=1", json={"input": {"order_id": "o_1"}}).json()["id"]
        attacker = f"attacker.example:{server.port}"
        for method, path, body in _attacks(parked):
            content = None if body is None else json.dumps(body)
            _refused(http.request(method, path, content=content, headers=_rebinding(attacker)), path)
        assert http.get(f"/runs/{parked}").json()["status"] == "interrupted"
        assert http.get("/healthz", headers={"host": attacker}).status_code == 200
        assert http.get("/runs", headers={"host": f"localhost:{server.port}"}).status_code == 200
