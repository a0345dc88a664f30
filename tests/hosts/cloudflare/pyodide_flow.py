"""The refund flow on the Durable Objects runtime, run inside real Pyodide (``pyodide_run.mjs``).

Each phase is a fresh interpreter: ``start`` runs the refund agent to its interrupt and writes
the simulation's storage (SQLite's bytes) to a file; ``resume`` loads it, answers the interrupt
and checks the run completed with the charge made once, then runs a sleep woken by its
object's alarm (delivered twice). Threads, signal handlers and
subprocesses raise the whole time: the runtime must need none of them.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any


def forbid() -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the runtime started a thread, a signal handler or a subprocess under Pyodide")

    threading.Thread.start = refuse  # type: ignore[method-assign]
    signal.signal = refuse
    subprocess.Popen.__init__ = refuse  # type: ignore[method-assign]


async def main(phase: str, state_path: str) -> str:
    assert sys.platform == "emscripten", sys.platform
    forbid()
    from . import agents as fixtures
    from .deployment import Deployment

    deployment = Deployment()
    if phase == "start":
        deployment.boot()
        started = await deployment.json("POST", "/agents/refund/runs?wait=1", {"input": {"order_id": "o1"}})
        assert started["status"] == "interrupted", started
        inbox = await deployment.json("GET", "/runs?status=interrupted")
        assert [run["id"] for run in inbox["runs"]] == [started["id"]]
        Path(state_path).write_text(json.dumps({"run_id": started["id"], "storage": deployment.sim.dump()}))
        return f"interrupted {started['id']}"
    state = json.loads(Path(state_path).read_text())
    deployment.sim.load(state["storage"])
    deployment.boot()
    run_id = state["run_id"]
    resumed = await deployment.json("POST", f"/runs/{run_id}/resume?wait=1", {"answer": {"approved": True}})
    assert (resumed["status"], resumed["output"]) == ("completed", "refunded"), resumed
    assert fixtures.calls["charge o1"] == 1, fixtures.calls
    assert (await deployment.json("GET", f"/runs/{run_id}"))["status"] == "completed"

    # A sleep woken by the run object's alarm, delivered twice: no completed step runs again.
    napping = await deployment.json("POST", "/agents/napper/runs?wait=1", {"input": "fox"})
    assert napping["status"] == "sleeping", napping
    deployment.advance(3600)
    assert await deployment.sim.deliver_alarms(again=True) == 2
    woken = await deployment.json("GET", f"/runs/{napping['id']}")
    assert (woken["status"], woken["output"]) == ("completed", "rested fox"), woken
    assert (fixtures.calls["before nap"], fixtures.calls["after nap"]) == (1, 1), fixtures.calls

    # A Cron Trigger runs a plain ``def`` task inline (no worker thread), once per tick.
    tasks = {"digest": {"schedule": "0 8 * * *", "handler": "tests.hosts.cloudflare.agents:sync_digest"}}
    deployment.boot(crons={"0 8 * * *": ["digest"]}, tasks=tasks)
    tick = 1796112000000.0  # 2026-12-01 08:00 UTC
    await deployment.sim.scheduled("0 8 * * *", tick)
    await deployment.sim.scheduled("0 8 * * *", tick)
    assert fixtures.calls["sync task digest 2026-12-01T08:00:00+00:00"] == 1, fixtures.calls
    return f"completed {run_id} on {sys.platform} Python {sys.version.split()[0]}"
