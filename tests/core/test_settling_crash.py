"""A cancelled run's ``settling`` is cleared once the process running its steps is gone (a real
``kill -9``): by the cancel that finds it gone, or by the sweep once the OS shows it ended or its
lease lapsed. While that process lives, it renews its lease, so the sweep leaves ``settling`` as
it is."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_unit import RunEngine, RunStatus
from agent_unit.stores.sqlite import SQLiteStore

from ..support.crash import kill, start_and_kill, start_child
from ..support.process_agents import AGENTS

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")

CHARGING = ("tests.support.process_agents:AGENTS", "charging", None)
SERVER = {"CHILD_STAYS": "1"}  # the child lives on after the cancel, as a server does


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[RunEngine]:
    """The operator's process, over the same file as the child's (it sweeps only when told)."""
    unit = RunEngine(AGENTS, SQLiteStore(tmp_path / "runs.db"), lease_ttl="1s", background_sweep=False)
    yield unit
    await unit.aclose()
    await unit.store.close()


async def test_a_cancel_that_finds_the_process_running_the_step_killed_has_nothing_to_settle(
    tmp_path: Path, engine: RunEngine
) -> None:
    run_id = await start_and_kill(tmp_path / "runs.db", *CHARGING, marker=tmp_path / "marker")
    assert [e for e in await engine.events(run_id) if b"STEP_STARTED" in e.data.encode()]  # it showed its step
    cancelled = await engine.cancel(run_id, settle=0)
    assert cancelled.status == RunStatus.cancelled and cancelled.settling is None


async def test_a_run_cancelled_while_its_step_runs_settles_once_the_process_running_it_is_killed(
    tmp_path: Path, engine: RunEngine
) -> None:
    child, run_id = await start_child(tmp_path / "runs.db", *CHARGING, marker=tmp_path / "marker", env=SERVER)
    try:
        cancelled = await engine.cancel(run_id, settle=0)
        assert cancelled.settling == ["charge"]
        await asyncio.sleep(2.5)  # past the lease the cancel found: the child renews it while its thread runs
        await engine.sweep()
        assert (await engine.get(run_id)).settling == ["charge"]
    finally:
        kill(child)
    await engine.sweep()  # the OS shows the child ended: nothing of the run runs any more
    done = await engine.get(run_id)
    assert done.status == RunStatus.cancelled and done.settling is None


async def test_a_settling_run_whose_process_elsewhere_was_killed_settles_when_its_lease_lapses(
    tmp_path: Path, engine: RunEngine
) -> None:
    elsewhere = {**SERVER, "CHILD_OWNER": "another-machine:1:4026531836:1:n", "CHILD_LEASE_TTL": "1s"}
    child, run_id = await start_child(tmp_path / "runs.db", *CHARGING, marker=tmp_path / "marker", env=elsewhere)
    try:
        assert (await engine.cancel(run_id, settle=0)).settling == ["charge"]
        await asyncio.sleep(1.5)  # the child hears of the cancel and renews its lease for the step
    finally:
        kill(child)
    stored = await engine.store.load_run(run_id)
    assert stored is not None and stored.lease_expires is not None and stored.settling == ["charge"]
    if stored.lease_expires - time.time() > 0.2:  # not provably gone here (another machine's), not lapsed
        await engine.sweep()
        assert (await engine.get(run_id)).settling == ["charge"]
    await asyncio.sleep(max(0.0, stored.lease_expires - time.time()) + 0.1)
    await engine.sweep()
    done = await engine.get(run_id)
    assert done.status == RunStatus.cancelled and done.settling is None
