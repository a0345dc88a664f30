"""Kill a process with SIGKILL in the middle of a run, then recover the run in this one.

The child starts the run over a SQLite file and hangs where the agent writes ``HANG_MARKER``;
the test kills it there. :func:`recover` is the other process: a new engine over the same file,
whose sweep takes the run over at once (the child ran on this machine and has ended), or once the
dead child's lease has lapsed where the OS cannot tell.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent_unit import RunEngine, RunRecord, RunStatus
from agent_unit.stores.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import asyncio, importlib, json, os, sys
from agent_unit import RunEngine
from agent_unit.stores.sqlite import SQLiteStore

module, _, attribute = sys.argv[2].partition(":")
AGENTS = getattr(importlib.import_module(module), attribute)
if os.environ.get("CHILD_SETUP"):  # a module to import first (one that configures telemetry)
    importlib.import_module(os.environ["CHILD_SETUP"])

async def main():
    # CHILD_OWNER: a lease owner of another machine's form, which the OS here cannot prove ended
    owner, ttl = os.environ.get("CHILD_OWNER"), os.environ.get("CHILD_LEASE_TTL", "2s")
    engine = RunEngine(AGENTS, SQLiteStore(sys.argv[1]), lease_ttl=ttl, owner=owner)
    record = await engine.start(sys.argv[3], json.loads(sys.argv[4]))
    print(record.id, flush=True)
    await engine.wait(record.id)
    if os.environ.get("CHILD_STAYS"):  # a server lives on after the run ends (a cancelled step settles)
        await asyncio.Event().wait()

asyncio.run(main())
"""


async def start_and_kill(
    db: Path, agents: str, agent: str, input: Any, *, marker: Path, env: Mapping[str, str] | None = None
) -> str:
    """Start ``agent`` of ``agents`` (``module:ATTRIBUTE``) in a child; SIGKILL it at the marker; the run id."""
    child, run_id = await start_child(db, agents, agent, input, marker=marker, env=env)
    assert child.poll() is None, "the child ended before it was killed"
    kill(child)
    return run_id


async def start_child(
    db: Path, agents: str, agent: str, input: Any, *, marker: Path, env: Mapping[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """Start ``agent`` of ``agents`` in a child, and wait for it to reach the marker: the child
    (for :func:`kill`, which the caller must call, even on failure) and the run id."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "HANG_MARKER": str(marker), **(env or {})}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), agents, agent, json.dumps(input)],
        env=environment,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        run_id = child.stdout.readline().strip()
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline, "the child never reached the marker"
            await asyncio.sleep(0.02)
    except BaseException:
        kill(child)
        raise
    return child, run_id


def kill(child: subprocess.Popen[str]) -> None:
    """SIGKILL the child (if it still runs) and reap it."""
    if child.poll() is None:
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
    if child.stdout is not None:
        child.stdout.close()


async def recover(agents: Mapping[str, Any], db: Path, run_id: str) -> RunRecord:
    """A new engine over the file whose sweep recovers the run: at once, or after the dead child's lease lapses."""
    engine = RunEngine(agents, SQLiteStore(db), lease_ttl="1s", background_sweep=False)
    try:
        stuck = await engine.get(run_id)
        assert stuck.status == RunStatus.running  # the dead process still "holds" it
        early = await engine.sweep(wait=True)
        if early.recovered:  # the child's process has ended on this machine: no need to wait for its lease
            assert early.run_ids == (run_id,)
            return await engine.get(run_id)
        await asyncio.sleep(max(0.0, (stuck.lease_expires or 0) - time.time()) + 0.05)
        result = await engine.sweep(wait=True)
        assert result.recovered == 1 and result.run_ids == (run_id,)
        return await engine.get(run_id)
    finally:
        await engine.aclose()
        await engine.store.close()
