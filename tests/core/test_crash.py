"""A real process is killed with SIGKILL inside a step; another process recovers the run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent_unit import RunStatus

from ..support.crash import recover, start_and_kill
from ..support.process_agents import AGENTS


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
async def test_sigkill_inside_a_step_is_recovered_without_repeating_finished_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, effects, marker = tmp_path / "runs.db", tmp_path / "effects.txt", tmp_path / "marker"
    env = {"EFFECTS_FILE": str(effects), "HANG_IN_STEP_TWO": "1"}
    run_id = await start_and_kill(db, "tests.support.process_agents:AGENTS", "crashable", None, marker=marker, env=env)
    monkeypatch.setenv("EFFECTS_FILE", str(effects))
    done = await recover(AGENTS, db, run_id)

    assert done.status == RunStatus.completed and done.output == "charged" and done.attempt == 2
    lines = effects.read_text().splitlines()
    kinds = [line.split()[0] for line in lines]
    assert kinds == ["one", "two-start", "two-start", "two-done"]  # step one never repeats
    keys = {line.split()[0]: line.split()[1] for line in lines}
    two_keys = [line.split()[1] for line in lines if line.startswith("two-")]
    assert len(set(two_keys)) == 1  # the re-run of step two kept its idempotency key
    assert keys["one"] != two_keys[0]
