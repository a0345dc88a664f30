"""A Worker deployed on the Workers *simulation*: the tests' (and the Pyodide run's) way to drive it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_unit._clock import ManualClock

from . import agents as fixtures
from .workers_sim import Request, Response, WorkersSim

SECRET = "s3cret"
BINDINGS = {"AGENT_UNIT_RUNS": "AgentUnitRun", "AGENT_UNIT_INDEX": "AgentUnitIndex"}


class Deployment:
    """One Worker deployed on the simulation; :meth:`boot` starts a new isolate."""

    def __init__(self) -> None:
        self.clock = ManualClock(datetime(2026, 12, 1, 8, 0, tzinfo=UTC))
        self.sim = WorkersSim(self.clock)
        self.options: dict[str, Any] = {}

    def boot(self, **options: Any) -> Any:
        from workers import WorkerEntrypoint

        from agent_unit.hosts.cloudflare import create_worker

        self.options = {**self.options, **options}
        options = {"agents": lambda: fixtures.AGENTS, "clock": self.clock, **self.options}
        if options.get("server") is not None:
            options = {key: value for key, value in options.items() if key not in ("agents", "clock")}
        worker = create_worker(**options)

        class Default(WorkerEntrypoint):  # what the build's src/entry.py holds
            async def fetch(self, request: Any) -> Any:
                return await worker.fetch(request, self.env, self.ctx)

            async def scheduled(self, controller: Any, env: Any, ctx: Any) -> None:
                await worker.scheduled(controller, self.env, self.ctx)

        classes = {"AgentUnitRun": worker.AgentUnitRun, "AgentUnitIndex": worker.AgentUnitIndex}
        variables = {"AGENT_UNIT_SECRET": SECRET, "AGENT_UNIT_URL": "https://agents.example.com"}
        self.sim.isolate(Default, classes, BINDINGS, variables)
        return worker

    async def call(self, method: str, path: str, body: Any = None, headers: Mapping[str, str] = {}) -> Response:
        sent = {"content-type": "application/json", **headers} if body is not None else dict(headers)
        data = b"" if body is None else json.dumps(body).encode()
        return await self.sim.fetch(
            Request(f"https://agents.example.com{path}", method=method, headers=sent, body=data)
        )

    async def json(self, method: str, path: str, body: Any = None) -> Any:
        response = await self.call(method, path, body)
        assert response.status < 300, (response.status, await response.text())
        return await response.json()

    def advance(self, seconds: float) -> None:
        self.clock.advance(timedelta(seconds=seconds))
