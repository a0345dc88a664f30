"""One JSON casing per surface: the REST API's own JSON is snake_case; events are AG-UI's camelCase."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from agent_unit import create_agent_unit

from ..protocols.test_http import sse
from ..support.agui_agents import AGENTS

SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")
USER_DATA = {"input", "output", "payload", "answer_schema", "input_schema", "output_schema"}  # the user's own keys


def camel_keys(value: Any, where: str = "") -> list[str]:
    """Every key of the API's own JSON in ``value`` that is not snake_case (the user's data skipped)."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if not SNAKE.match(key):
                found.append(f"{where}.{key}")
            if key not in USER_DATA:
                found += camel_keys(item, f"{where}.{key}")
    elif isinstance(value, list):
        for item in value:
            found += camel_keys(item, f"{where}[]")
    return found


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    app = create_agent_unit(AGENTS, store="memory://")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as client:
        yield client
    await app.engine.aclose()


async def test_the_run_record_and_its_usage_are_snake_case_while_run_finished_keeps_ag_ui_usage(
    http: httpx.AsyncClient,
) -> None:
    record = (await http.post("/agents/greet/runs?wait=1", json={"input": "Ada"})).json()
    assert record["status"] == "completed"
    assert record["usage"] == [
        {"provider": "test", "model": "greeter", "input_tokens": 3, "output_tokens": 5, "total_tokens": 8}
    ]
    assert camel_keys(record) == []
    assert camel_keys((await http.get(f"/runs/{record['id']}")).json()) == []
    assert camel_keys((await http.get("/runs")).json()) == []
    assert camel_keys((await http.get("/agents")).json()) == []
    assert camel_keys((await http.get("/runs/run_missing")).json()) == []

    events = sse((await http.get(f"/runs/{record['id']}/events")).text)
    finished = events[-1]
    assert finished["usage"] == [
        {"provider": "test", "model": "greeter", "inputTokens": 3, "outputTokens": 5, "totalTokens": 8}
    ]
    finished.pop("seq")
    TypeAdapter(Event).validate_python(finished)  # AG-UI's own TokenUsage


async def test_a_parked_runs_interrupt_shows_no_module_path_and_its_answer_is_still_checked(
    http: httpx.AsyncClient,
) -> None:
    parked = (await http.post("/agents/refund/runs?wait=1", json={"input": {"order_id": "o_1"}})).json()
    interrupt = parked["interrupt"]
    assert set(interrupt) == {"name", "key", "payload", "answer_schema", "expires_at"}
    assert "tests." not in json.dumps(parked) and "__main__" not in json.dumps(parked)
    assert camel_keys(parked) == []
    refused = await http.post(f"/runs/{parked['id']}/resume?wait=1", json={"answer": {"approved": "maybe"}})
    assert refused.status_code == 422
    done = await http.post(f"/runs/{parked['id']}/resume?wait=1", json={"answer": {"approved": True}})
    assert done.json()["status"] == "completed"
