"""Two processes over one SQLite file race to resume (and to wake) the same run, many times."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sqlite3
import time
from collections import Counter
from multiprocessing.synchronize import Barrier
from pathlib import Path

from agent_unit import RunConflict, RunEngine, RunStatus
from agent_unit._clock import ManualClock
from agent_unit.stores.sqlite import SQLiteStore

from ..support.process_agents import AGENTS

ROUNDS = 40


def _racer(
    db: str, effects: str, action: str, run_ids: list[str], barrier: Barrier, results: multiprocessing.Queue
) -> None:
    os.environ["EFFECTS_FILE"] = effects

    async def race() -> list[str]:
        engine = RunEngine(AGENTS, SQLiteStore(db), background_sweep=False)
        outcomes = []
        for run_id in run_ids:
            barrier.wait()  # both processes call at the same moment
            try:
                if action == "resume":
                    await engine.resume(run_id, "yes", wait=True)
                else:
                    await engine.wake(run_id, wait=True)
                outcomes.append("won")
            except RunConflict:
                outcomes.append("conflict")
        await engine.aclose()
        return outcomes

    results.put((os.getpid(), asyncio.run(race())))


async def _prepare(db: Path, agent: str) -> list[str]:
    clock = ManualClock()  # no timers: only the racers may wake the sleepers
    engine = RunEngine(AGENTS, SQLiteStore(db), clock=clock)
    ids = [(await engine.start(agent, i, wait=True)).id for i in range(ROUNDS)]
    await engine.aclose()
    return ids


def _race(tmp_path: Path, agent: str, action: str) -> tuple[list[str], list[tuple[str, str]]]:
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    run_ids = asyncio.run(_prepare(db, agent))
    if action == "wake":
        time.sleep(1.05)  # the sleepers are due
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    racers = [
        context.Process(target=_racer, args=(str(db), str(effects), action, run_ids, barrier, results))
        for _ in range(2)
    ]
    for racer in racers:
        racer.start()
    outcomes = [results.get(timeout=120)[1] for _ in racers]
    for racer in racers:
        racer.join(timeout=30)
        assert racer.exitcode == 0
    return run_ids, list(zip(*outcomes, strict=True))


def _journal_keys(db: Path, run_id: str) -> list[str]:
    with sqlite3.connect(db) as connection:
        return [row[0] for row in connection.execute("SELECT key FROM journal WHERE run_id = ?", (run_id,))]


def test_two_processes_resuming_the_same_run_exactly_one_wins(tmp_path: Path) -> None:
    run_ids, rounds = _race(tmp_path, "approval", "resume")
    assert all(sorted(pair) == ["conflict", "won"] for pair in rounds), rounds
    effects = Counter((tmp_path / "effects.txt").read_text().splitlines())
    assert effects == Counter({f"after-approval {run_id}": 1 for run_id in run_ids})

    async def check() -> None:
        engine = RunEngine(AGENTS, SQLiteStore(tmp_path / "runs.db"), background_sweep=False)
        for run_id in run_ids:
            record = await engine.get(run_id)
            assert record.status == RunStatus.completed and record.output == "approved yes"
            assert sorted(_journal_keys(tmp_path / "runs.db", run_id)) == ["interrupt:approve#0", "step:after#0"]
            types = [event.to_dict()["type"] for event in await engine.events(run_id)]
            assert types.count("RUN_STARTED") == 2 and types.count("RUN_FINISHED") == 1
        await engine.aclose()

    asyncio.run(check())


def test_two_processes_waking_the_same_run_exactly_one_wins(tmp_path: Path) -> None:
    run_ids, rounds = _race(tmp_path, "nap", "wake")
    assert all(sorted(pair) == ["conflict", "won"] for pair in rounds), rounds
    effects = Counter((tmp_path / "effects.txt").read_text().splitlines())
    assert effects == Counter({f"after-nap {run_id}": 1 for run_id in run_ids})
    for run_id in run_ids:
        assert sorted(_journal_keys(tmp_path / "runs.db", run_id)) == ["sleep:#0", "step:after#0"]
