"""What a sweep's ``due_runs`` costs on the SQLite store with runs in flight, nothing due.

    python bench/stores/due_runs.py --running 10000 --sleeping 1000

Since schema version 3 the store keeps running runs out of its ``runs_due`` index (a lease
renewal would move their entry each time) and reads them through ``runs_status``, so a sweep reads
the runs in flight as well as the runs due. This times ``due_runs`` (median of 20 calls, in
process) on a store of ``--running`` runs whose leases have not lapsed and ``--sleeping`` runs
not yet due, once with nothing due and once with 100 runs due.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from agent_unit._ids import new_id
from agent_unit._records import RunRecord, RunStatus
from agent_unit.stores.sqlite import SQLiteStore

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def record(status: RunStatus, due_at: float) -> RunRecord:
    running = status == RunStatus.running
    return RunRecord(
        id=new_id("run"),
        agent="a",
        thread_id=new_id("thread"),
        status=status,
        input={},
        created_at=NOW,
        updated_at=NOW,
        version=1,
        lease_owner="host:1:x" if running else None,
        lease_expires=due_at if running else None,
        due_at=due_at,
    )


async def timed(store: SQLiteStore, before: float) -> tuple[int, float]:
    times, found = [], 0
    for _ in range(20):
        began = time.perf_counter()
        found = len(await store.due_runs(before=before, limit=100))
        times.append(time.perf_counter() - began)
    return found, statistics.median(times) * 1e3


async def main(running: int, sleeping: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "runs.db")
        for i in range(running):
            await store.create_run(record(RunStatus.running, 1_000.0 + i))
        for i in range(sleeping):
            await store.create_run(record(RunStatus.sleeping, 1_000_000.0 + i))
        for before, label in ((10.0, "nothing due"), (1_000.0 + 99, "100 running runs due")):
            found, ms = await timed(store, before)
            print(f"{running:,} running, {sleeping:,} sleeping, {label}: {found} rows in {ms:.2f} ms")
        await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--running", type=int, default=10_000)
    parser.add_argument("--sleeping", type=int, default=1_000)
    args = parser.parse_args()
    asyncio.run(main(args.running, args.sleeping))
