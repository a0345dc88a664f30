"""The gateway: a protocol of one's own reaches runs the way MCP, A2A and AG-UI do."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_unit import create_agent_unit
from agent_unit._records import StoredEvent
from agent_unit.http.gateway import Gateway
from agent_unit.http.stream import KeepAlive

from ..support.http_agents import AGENTS


def _only_alice(request: Request, action: str, run: dict[str, Any]) -> bool:
    return request.headers.get("x-user") == "alice"


def _protocol(gateway: Gateway) -> Route:
    """A third-party protocol: it starts a run, then answers the run's stored event types."""

    async def endpoint(request: Request) -> Response:
        await gateway.authorize(request, "start", {"agent": "refund", "thread_id": None})
        started = await gateway.start("refund", {"order_id": "o_1"}, wait=True)
        record = await gateway.run(request, "events", started.id)
        types = []
        async for item in gateway.events(record.id, after=0, stop=asyncio.Event()):
            assert isinstance(item, StoredEvent)  # stored events, not SSE text
            types.append(json.loads(item.data)["type"])
        return JSONResponse({"run": record.id, "status": record.status.value, "types": types})

    return Route("/mine", endpoint, methods=["POST"])


async def test_a_protocol_of_ones_own_on_the_gateway_is_authorized_and_reads_stored_events() -> None:
    unit = create_agent_unit(AGENTS, store="memory://", authorize=_only_alice)
    unit.router.routes.append(_protocol(unit.gateway))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=unit), base_url="http://unit") as http:
        refused = await http.post("/mine")
        served = await http.post("/mine", headers={"x-user": "alice"})
    await unit.engine.aclose()
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    body = served.json()
    assert body["status"] == "interrupted"
    assert body["types"] == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_INTERRUPTED"]


async def test_a_following_event_stream_yields_a_keep_alive_marker_when_nothing_happens() -> None:
    unit = create_agent_unit(AGENTS, store="memory://", keepalive_seconds=0.01, poll_interval=0.01)
    record = await unit.gateway.start("refund", {"order_id": "o_1"}, wait=True)
    stop = asyncio.Event()
    items = []
    async for item in unit.gateway.events(record.id, after=0, stop=stop, follow=True):
        items.append(item)
        if isinstance(item, KeepAlive):
            stop.set()
    await unit.engine.aclose()
    assert [type(item) for item in items] == [StoredEvent] * 4 + [KeepAlive]
