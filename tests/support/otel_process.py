"""A process that starts or resumes a run with its spans written to ``SPANS_FILE`` (see otel_spans).

``python -m tests.support.otel_process start DB TRACEPARENT``: starts ``refund`` over the SQLite
file ``DB`` through the HTTP API with that ``traceparent`` header, prints the run id once it parks.
``python -m tests.support.otel_process resume DB RUN_ID``: answers it and waits for it to end.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import httpx

from agent_unit import Run, RunEngine, create_agent_unit, define_agent

from . import (
    otel_spans,  # noqa: F401 - configures telemetry from SPANS_FILE
)


@define_agent
async def refund(input: dict[str, Any], run: Run) -> str:
    order = await run.step("load", lambda: {"id": input["id"]})
    answer = await run.interrupt("approve", order)
    await run.step("charge", lambda step: step.idempotency_key)
    return f"refunded: {answer}"


AGENTS = {"refund": refund}


async def start(db: str, traceparent: str) -> None:
    app = create_agent_unit(AGENTS, store=f"sqlite:///{db}")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        response = await http.post(
            "/agents/refund/runs?wait=1", json={"input": {"id": "o1"}}, headers={"traceparent": traceparent}
        )
    assert response.status_code in (200, 202), response.text
    assert response.json()["status"] == "interrupted", response.text
    await app.engine.aclose()
    print(response.json()["id"])


async def resume(db: str, run_id: str) -> None:
    engine = RunEngine(AGENTS, f"sqlite:///{db}")
    record = await engine.resume(run_id, "yes", wait=True)
    assert record.status == "completed", record
    await engine.aclose()


if __name__ == "__main__":
    command, db, value = sys.argv[1:4]
    asyncio.run(start(db, value) if command == "start" else resume(db, value))
