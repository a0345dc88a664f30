"""A user's own Starlette app: wait_until work after the response, a binding and a secret read via env."""

from __future__ import annotations

import asyncio
import json

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent_unit.env import env, wait_until


async def record(path: str, **fields: object) -> None:
    from pyodide.http import pyfetch  # only a Worker has it (the build imports this module)

    await pyfetch(f"{env['LEDGER_URL']}{path}", method="POST", body=json.dumps(fields))


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def later(request: Request) -> JSONResponse:
    async def work() -> None:
        await asyncio.sleep(0.5)  # after the response has gone
        await record("/later", after="response")

    wait_until(work())
    return JSONResponse({"accepted": True})


async def settings(request: Request) -> JSONResponse:
    return JSONResponse({"greeting": env["GREETING"], "token": env.get("API_TOKEN"), "missing": "NOPE" in env})


app = Starlette(
    routes=[
        Route("/healthz", healthz),
        Route("/later", later, methods=["POST"]),
        Route("/settings", settings),
    ]
)
