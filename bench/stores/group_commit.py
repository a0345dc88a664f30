"""What a resume's write costs SQLite alone, one transaction each, or several in one transaction.

    .venv/bin/python bench/stores/group_commit.py [--n 6000] [--rounds 3] [--shuffle]

A resume that replays to its run's end writes one transaction (``SQLiteStore``'s statements, as
``tests/protocols/test_resume_cost.py`` counts them): the run's row updated under its version,
``PRAGMA data_version``, the answer's journal entry and the events' row. This times those
statements alone (no agent-unit code; process time per write) on the store's own schema and
pragmas, over N parked runs of consecutive ids (as runs started together get), resumed in the order
they were made (as the HTTP benchmark resumes them) or, with ``--shuffle``, in a random order (as
answers from people come):

- ``k=1``: each write its own ``BEGIN IMMEDIATE`` ... ``COMMIT``, as the store writes today;
- ``k=2, 4, 8``: k writes in one transaction, each in a ``SAVEPOINT`` (so a write that fails
  would roll back alone): what a store that commits the writes of concurrent requests together
  (a group commit) would pay in SQLite, before the cost of making each request wait for the commit.

It also times what each request would pay to wait for a commit it does not make itself: a
future, set from a callback of the event loop and awaited (asyncio's loop, and uvloop where
installed, as built servers run).

Printed only: the figures go to BENCHMARKS.md by hand, with the command.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent_unit.stores.sqlite import SQLiteStore

BATCHES = (1, 2, 4, 8)
PARK = "INSERT INTO runs (id, agent, thread_id, status, version, data) VALUES (?, 'approve', ?, 'interrupted', 2, ?)"
END = "UPDATE runs SET status = 'completed', version = 3, data = ? WHERE id = ? AND version = 2"


def parked(folder: Path, n: int) -> sqlite3.Connection:
    """A store file with ``n`` interrupted runs, and a connection to it with the store's pragmas."""
    path = folder / "runs.db"
    SQLiteStore(str(path))  # the schema, and WAL mode (a property of the file)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = NORMAL")
    data = json.dumps({"input": {}, "output": None, "answers": [], "pad": "x" * 300})  # a record's size
    db.execute("BEGIN IMMEDIATE")
    for i in range(n):
        run_id = f"run_{i:026d}"
        db.execute(PARK, (run_id, f"thread_{i:026d}", data))
        db.execute("INSERT INTO events (run_id, seq, n, data) VALUES (?, 1, 1, ?)", (run_id, "{}" * 40))
    db.execute("COMMIT")
    return db


def resume_write(db: sqlite3.Connection, i: int, data: str) -> None:
    """The statements of one resume's transaction, for run ``i``."""
    run_id = f"run_{i:026d}"
    db.execute(END, (data, run_id))
    db.execute("PRAGMA data_version").fetchone()
    db.execute(
        "INSERT INTO journal (run_id, key, value, error, meta) VALUES (?, 'interrupt:approve#0', 'true', NULL, '{}')",
        (run_id,),
    )
    db.execute("INSERT INTO events (run_id, seq, n, data) VALUES (?, 6, 2, ?)", (run_id, "{}" * 120))


def per_write(k: int, n: int, shuffle: bool) -> float:
    """Process time per write (µs) with ``k`` writes per transaction, on a fresh file."""
    with tempfile.TemporaryDirectory() as folder:
        db = parked(Path(folder), n)
        data = json.dumps({"input": {}, "output": "ok", "answers": [{"by": None}], "pad": "x" * 300})
        order = list(range(n))
        if shuffle:
            random.Random(n).shuffle(order)
        began = time.process_time()
        for first in range(0, n - n % k, k):
            db.execute("BEGIN IMMEDIATE")
            for i in range(first, first + k):
                if k > 1:
                    db.execute("SAVEPOINT write")
                resume_write(db, order[i], data)
                if k > 1:
                    db.execute("RELEASE write")
            db.execute("COMMIT")
        spent = time.process_time() - began
        db.close()
    return spent / (n - n % k) * 1e6


async def _waits(n: int) -> float:
    """Process time (s) of ``n`` waits for a future a loop callback sets, less that of the bare loop."""
    loop = asyncio.get_running_loop()
    began = time.process_time()
    for _ in range(n):
        pass
    bare = time.process_time() - began
    began = time.process_time()
    for _ in range(n):
        done = loop.create_future()
        loop.call_soon(done.set_result, None)
        await done
    return time.process_time() - began - bare


def wait_costs(n: int = 200_000) -> dict[str, float]:
    """µs per wait for a commit made elsewhere, on each event loop there is."""
    runners: dict[str, Callable[[Coroutine[Any, Any, float]], float]] = {"asyncio": asyncio.run}
    try:
        import uvloop
    except ImportError:
        pass
    else:
        runners["uvloop"] = uvloop.run
    return {name: statistics.median(run(_waits(n)) for _ in range(3)) / n * 1e6 for name, run in runners.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=6000, help="writes per case")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the cases alternating in each")
    parser.add_argument("--shuffle", action="store_true", help="resume the runs in a random order")
    args = parser.parse_args()
    figures: dict[int, list[float]] = {k: [] for k in BATCHES}
    for round_ in range(args.rounds):
        for k in BATCHES:
            figures[k].append(per_write(k, args.n, args.shuffle))
        print(f"round {round_ + 1}: " + ", ".join(f"k={k} {figures[k][-1]:.1f} µs" for k in BATCHES), flush=True)
    alone = statistics.median(figures[1])
    for k in BATCHES:
        median = statistics.median(figures[k])
        print(f"k={k}: {median:.1f} µs a write (median of {args.rounds}), {median / alone:.2f} of one each")
    waits = ", ".join(f"{name} {cost:.2f} µs" for name, cost in wait_costs().items())
    print(f"a wait for a commit made by another request (a future set by a loop callback): {waits}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
