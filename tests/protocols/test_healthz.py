"""``GET /healthz``: 200 while the store answers, 503 once it does not, and never behind ``authorize``."""

from __future__ import annotations

from typing import Any

import httpx

from agent_unit import create_agent_unit

from ..support.http_agents import AGENTS
from ..support.servers import RedisServer


def refuse_everything(request: Any, action: str, run: Any) -> bool:
    return False


async def test_healthz_answers_200_while_redis_answers_and_503_once_it_is_stopped() -> None:
    redis = RedisServer().start()
    app = create_agent_unit(AGENTS, store=redis.url, base_path="/api/agents", authorize=refuse_everything)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
            up = await http.get("/api/agents/healthz")
            assert up.status_code == 200 and up.json() == {"status": "ok"}
            assert (await http.get("/api/agents/runs")).status_code == 403  # authorize guards the rest
            redis.stop()
            down = await http.get("/api/agents/healthz")
            assert down.status_code == 503
            assert down.json()["error"]["code"] == "store_unavailable"
            redis.start()
            assert (await http.get("/api/agents/healthz")).status_code == 200
    finally:
        await app.engine.aclose()
        redis.stop()


async def test_healthz_is_under_the_base_path_only() -> None:
    app = create_agent_unit(AGENTS, store="memory://", base_path="/api/agents")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        assert (await http.get("/healthz")).status_code == 404
        assert (await http.get("/api/agents/healthz")).status_code == 200
    await app.engine.aclose()
