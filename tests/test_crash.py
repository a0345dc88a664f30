"""A real process is killed with SIGKILL inside a step; another process recovers the run."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_unit import RunEngine, RunStatus
from agent_unit.stores.sqlite import SQLiteStore

from .process_agents import AGENTS

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import asyncio, sys
from agent_unit import RunEngine
from agent_unit.stores.sqlite import SQLiteStore
from tests.process_agents import AGENTS

async def main():
    engine = RunEngine(AGENTS, SQLiteStore(sys.argv[1]), lease_ttl="1s")
    record = await engine.start("crashable", None)
    print(record.id, flush=True)
    await engine.wait(record.id)

asyncio.run(main())
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
async def test_sigkill_inside_a_step_is_recovered_without_repeating_finished_steps(tmp_path: Path) -> None:
    db, effects, marker = tmp_path / "runs.db", tmp_path / "effects.txt", tmp_path / "marker"
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "EFFECTS_FILE": str(effects),
        "HANG_IN_STEP_TWO": "1",
        "HANG_MARKER": str(marker),
    }
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db)], env=environment, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    run_id = child.stdout.readline().strip()
    deadline = time.monotonic() + 20
    while not marker.exists():
        assert time.monotonic() < deadline, "the child never reached step two"
        await asyncio.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(timeout=10) == -signal.SIGKILL

    os.environ["EFFECTS_FILE"] = str(effects)
    try:
        engine = RunEngine(AGENTS, SQLiteStore(db), lease_ttl="1s", background_sweep=False)
        stuck = await engine.get(run_id)
        assert stuck.status == RunStatus.running  # the dead process still "holds" it
        assert (await engine.sweep()).recovered == 0  # not before its lease lapses
        await asyncio.sleep(max(0.0, (stuck.lease_expires or 0) - time.time()) + 0.05)
        result = await engine.sweep(wait=True)
        assert result.recovered == 1 and result.run_ids == (run_id,)
        done = await engine.get(run_id)
        await engine.aclose()
    finally:
        del os.environ["EFFECTS_FILE"]

    assert done.status == RunStatus.completed and done.output == "charged" and done.attempt == 2
    lines = effects.read_text().splitlines()
    kinds = [line.split()[0] for line in lines]
    assert kinds == ["one", "two-start", "two-start", "two-done"]  # step one never repeats
    keys = {line.split()[0]: line.split()[1] for line in lines}
    two_keys = [line.split()[1] for line in lines if line.startswith("two-")]
    assert len(set(two_keys)) == 1  # the re-run of step two kept its idempotency key
    assert keys["one"] != two_keys[0]
