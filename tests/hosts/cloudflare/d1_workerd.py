"""A real D1 binding for the tests: workerd's own D1 (through Miniflare), reached over loopback HTTP.

``d1_workerd.mjs`` runs a JavaScript Worker on workerd with a D1 database bound as ``DB``; this
module gives Python the binding's API (``prepare(sql).bind(*values)``, ``all()``, ``run()``,
``first()``, ``batch()``) by sending each call to that Worker, which makes it on the binding.
So the D1 store's SQL, its batches and the errors it reads are D1's own, not a simulation's.

What differs from a Python Worker: the call crosses HTTP instead of Pyodide's proxies (values
cross as JSON, and ``None`` is refused as Pyodide's ``undefined`` is, see ``d1_sim``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from ...support import fetch
from .d1_sim import D1Error, JsProxy
from .npm import wrangler_folder

SCRIPT = Path(__file__).with_name("d1_workerd.mjs")


@contextmanager
def workerd_d1() -> Iterator[str]:
    """Start the Worker; yield its URL; stop it."""
    folder = wrangler_folder()
    miniflare = folder / "node_modules" / "miniflare" / "dist" / "src" / "index.js"
    process = subprocess.Popen(
        ["node", str(SCRIPT)],
        cwd=folder,
        env={**os.environ, "MINIFLARE": str(miniflare)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise RuntimeError(f"workerd did not start: {process.stderr.read() if process.stderr else ''}")
    try:
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def reset(url: str) -> None:
    """Drop the store's tables: each test starts on an empty database."""
    fetch.post(url + "reset", timeout=30).raise_for_status()


class Statement:
    def __init__(self, database: WorkerdD1, sql: str, params: tuple[Any, ...] = ()) -> None:
        self.database = database
        self.sql = sql
        self.params = params

    def bind(self, *values: Any) -> Statement:
        if any(value is None for value in values):  # Pyodide passes None as undefined
            raise D1Error("D1_TYPE_ERROR: Type 'undefined' not supported for value 'undefined'")
        return Statement(self.database, self.sql, values)

    def item(self) -> dict[str, Any]:
        return {"sql": self.sql, "params": list(self.params)}

    async def all(self) -> JsProxy:
        return JsProxy(await self.database.call("all", [self]))

    async def run(self) -> JsProxy:
        return JsProxy(await self.database.call("run", [self]))

    async def first(self, column: str | None = None) -> Any:
        rows = (await self.database.call("all", [self]))["results"]
        if not rows:
            return None
        return rows[0][column] if column is not None else JsProxy(rows[0])


class WorkerdD1:
    """``env.DB`` as a Python Worker sees it, backed by workerd's D1."""

    def __init__(self, url: str) -> None:
        self.url = url
        # One client per event loop, not one per call: a client's TLS context alone costs
        # milliseconds of CPU, and a run's store makes hundreds of calls.
        self.clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}

    def prepare(self, sql: str) -> Statement:
        return Statement(self, sql)

    async def batch(self, statements: list[Statement]) -> list[JsProxy]:
        return [JsProxy(result) for result in await self.call("batch", statements)]

    async def call(self, kind: str, statements: list[Statement]) -> Any:
        loop = asyncio.get_running_loop()
        client = self.clients.get(loop)
        if client is None:
            client = self.clients[loop] = fetch.AsyncClient(timeout=30)
        response = await client.post(self.url + kind, json={"statements": [item.item() for item in statements]})
        found = response.json()
        if response.status_code != 200:
            raise D1Error(found["error"])
        return found
