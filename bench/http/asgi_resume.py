"""The resume path over HTTP, in process: the ASGI app called directly, no socket, no client library.

    python bench/http/asgi_resume.py N                # start 250 runs to their pause, resume N of them
    python bench/http/asgi_resume.py N --profile out  # the same under cProfile (stats written to ``out``)

The ``approve`` agent of ``bench/http/project`` on a SQLite store in a temp dir: each run is started
with ``POST /agents/approve/runs?wait=1`` and resumed with ``POST /runs/{id}/resume?wait=1``
``{"answer": true}``. Every size starts the same 250 runs, so under an instruction counter two
sizes differ only by their resumes::

    valgrind --tool=cachegrind --cache-sim=no python bench/http/asgi_resume.py 50
    valgrind --tool=cachegrind --cache-sim=no python bench/http/asgi_resume.py 250

(the second's count minus the first's, divided by 200, is one resume). It prints the process
time per resume, for a quick look without valgrind.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STARTED = 250  # runs started to their pause, whatever N is


async def call(app: Any, method: str, path: str, body: Any, query: bytes = b"wait=1") -> Any:
    """One request through the ASGI app, answered as JSON."""
    raw = json.dumps(body).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query,
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"accept", b"application/json"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(raw)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    sent = False
    chunks: list[bytes] = []
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await asyncio.Event().wait()  # a disconnect never comes
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    answer = json.loads(b"".join(chunks))
    if status >= 300:
        raise RuntimeError(f"{method} {path}: {status} {answer}")
    return answer


async def main(n: int, profile: str | None, hold: float) -> None:
    from agent_unit import create_agent_unit
    from agent_unit.stores.sqlite import SQLiteStore

    spec = importlib.util.spec_from_file_location("approve", HERE / "project" / "agents" / "approve.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    agent = module.agent

    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(str(Path(folder) / "runs.db"))
        app = create_agent_unit({"approve": agent}, store=store, background_sweep=False)
        ids = []
        for _ in range(max(STARTED, n) + 1):
            started = await call(app, "POST", "/agents/approve/runs", {"input": {}})
            assert started["status"] == "interrupted", started
            ids.append(started["id"])
        await call(app, "POST", f"/runs/{ids.pop()}/resume", {"answer": True})  # imports what a resume needs
        if hold:  # time to attach a sampling profiler (py-spy record --pid) to the resumes alone
            print(f"pid {os.getpid()}: resuming in {hold:g} s", flush=True)
            await asyncio.sleep(hold)
        profiler = cProfile.Profile() if profile else None
        cpu = time.process_time()
        if profiler is not None:
            profiler.enable()
        for run_id in ids[:n]:
            resumed = await call(app, "POST", f"/runs/{run_id}/resume", {"answer": True})
            assert resumed["status"] == "completed", resumed
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)  # type: ignore[arg-type]
        cpu = time.process_time() - cpu
        print(f"{n} resumes: {cpu / max(n, 1) * 1e6:,.0f} µs of process time each")
        await app.engine.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, help="resumes to make (of 250 runs started, or N if more)")
    parser.add_argument("--profile", metavar="FILE", help="write cProfile stats of the resumes to FILE")
    parser.add_argument("--hold", type=float, default=0.0, metavar="SECONDS", help="wait this long before the resumes")
    args = parser.parse_args()
    asyncio.run(main(args.n, args.profile, args.hold))
