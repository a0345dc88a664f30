"""agent-unit on one store URL: journaled steps/s and one-step runs/s (one process of the comparison).

    python bench/stores/agent_unit_store.py --store URL --workload steps|runs|append --n N [--go FILE]

``append`` is the store alone, no engine: N calls of ``store.append`` with one step's write set
(a journal entry, STEP_STARTED and STEP_FINISHED) on a running run, so ``steps`` beside it shows
what the engine's Python costs per step.

``--go FILE`` waits for the file to exist before the timed part, so several processes start
together. Prints one JSON object (with the timed window's start and end, wall clock) last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent_unit import Run, RunEngine, RunStatus, define_agent

WARMUP = 20


def wait_for(path: str) -> None:
    """Until ``path`` exists: the start signal of processes released together."""
    while not os.path.exists(path):
        time.sleep(0.001)


@define_agent
async def stepper(n: int, run: Run) -> int:
    for i in range(n):

        async def step(i: int = i) -> int:
            return i

        await run.step("s", step)
    return n


@define_agent
async def one_step(i: int, run: Run) -> int:
    async def step() -> int:
        return i

    return await run.step("s", step)


async def appends(engine: RunEngine, n: int) -> dict[str, object]:
    from datetime import UTC, datetime

    from agent_unit.runtime import JournalEntry, RunRecord

    now = datetime.now(UTC)
    record = RunRecord(
        id="run_append",
        agent="one",
        thread_id="t",
        status=RunStatus.running,
        created_at=now,
        updated_at=now,
        version=1,
        lease_owner="bench",
        lease_expires=time.time() + 600,
    )
    await engine.store.create_run(record)
    started = '{"type":"STEP_STARTED","stepName":"s","timestamp":1}'
    finished = '{"type":"STEP_FINISHED","stepName":"s","timestamp":1}'
    for i in range(WARMUP):
        await engine.store.append(record.id, owner="bench", journal=[JournalEntry(f"w{i}", "1")], events=[started])
    t0 = time.perf_counter()
    for i in range(n):
        entry = JournalEntry(f"step:s#{i}", str(i))
        await engine.store.append(record.id, owner="bench", journal=[entry], events=[started, finished])
    seconds = time.perf_counter() - t0
    return {
        "system": "agent-unit store",
        "workload": "append",
        "n": n,
        "seconds": round(seconds, 6),
        "per_sec": round(n / seconds, 1),
    }


async def main(args: argparse.Namespace) -> dict[str, object]:
    engine = RunEngine({"stepper": stepper, "one": one_step}, args.store, background_sweep=False, lease_ttl="60s")
    check = getattr(engine.store, "check", None)
    if check is not None:
        await check()
    try:
        if args.workload == "append":
            return await appends(engine, args.n)
        if args.workload == "steps":
            await engine.start("stepper", WARMUP, wait=True)
        else:
            for i in range(WARMUP):
                await engine.start("one", i, wait=True)
        if args.go:
            await asyncio.to_thread(wait_for, args.go)
        began, t0 = time.time(), time.perf_counter()
        if args.workload == "steps":
            record = await engine.start("stepper", args.n, wait=True)
            assert record.status == RunStatus.completed, record.error
        else:
            for i in range(args.n):
                record = await engine.start("one", i, wait=True)
                assert record.status == RunStatus.completed, record.error
        seconds = time.perf_counter() - t0
        ended = time.time()
    finally:
        await engine.aclose()
        await engine.store.close()
    return {
        "system": "agent-unit",
        "workload": args.workload,
        "n": args.n,
        "seconds": round(seconds, 6),
        "per_sec": round(args.n / seconds, 1),
        "began": began,
        "ended": ended,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--workload", choices=["steps", "runs", "append"], required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--go")
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
