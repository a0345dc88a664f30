"""The cost of one journaled no-op step, for an instruction counter or a CPU clock.

Runs one thing N times in a fresh process and exits, so an instruction counter run over the whole
process (two runs, N and a small N, subtracted and divided) gives the cost of one step without the
start-up:

- ``steps``: one run of ``bench/agent_unit_bench.py``'s ``steps`` agent (N awaited no-op
  ``run.step`` calls) on the SQLite store, as ``--only au-steps-normal`` runs it.
- ``engine``: the same with the store's ``append`` replaced by one that writes nothing (it
  returns the next seq): what the engine's Python costs per step.
- ``raw``: ``peers/raw_sqlite.py``'s loop (``BEGIN IMMEDIATE; INSERT; COMMIT``), same pragmas.

``--cpu R`` instead times the measured part R times (process time, every thread's) and prints
the best per-step figure, as the benchmark reports ``cpu_us_per_step``.

Usage: python step_cost.py --mode steps|engine|raw --n N --db DIR [--cpu R]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))


def fresh(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def no_append(store: Any) -> None:
    """Replace ``store.append`` with one that writes nothing and returns the next seq."""
    seqs: dict[str, int] = {}

    async def append(run_id: str, *, owner: str, journal: Sequence[Any] = (), events: Sequence[str] = ()) -> int:
        seqs[run_id] = seqs.get(run_id, 0) + len(events)
        return seqs[run_id]

    store.append = append


def agent_unit_loop(path: Path, engine_only: bool) -> tuple[Callable[[int], None], Callable[[], None]]:
    from agent_unit_bench import AGENTS, check

    from agent_unit import RunEngine
    from agent_unit.stores.sqlite import SQLiteStore

    fresh(path)
    loop = asyncio.new_event_loop()
    store = SQLiteStore(path, synchronous="normal")
    if engine_only:
        no_append(store)
    engine = RunEngine(AGENTS, store)

    def go(n: int) -> None:
        check(loop.run_until_complete(engine.start("steps", n, wait=True)), n)

    def close() -> None:
        loop.run_until_complete(engine.aclose())
        loop.run_until_complete(store.close())
        loop.close()

    go(20)  # warm-up, as the benchmark's
    return go, close


def raw_loop(path: Path) -> tuple[Callable[[int], None], Callable[[], None]]:
    from raw_sqlite import open_db, run_steps  # type: ignore[import-not-found]  # bench/peers, put on the path above

    fresh(path)
    conn = open_db(str(path), "normal")
    runs = iter(range(1_000_000))

    def go(n: int) -> None:
        run_steps(conn, f"run-{next(runs)}", n)

    go(20)
    return go, conn.close


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["steps", "engine", "raw"], default="steps")
    ap.add_argument("--n", type=int, default=4200)
    ap.add_argument("--db", default=".")
    ap.add_argument("--cpu", type=int, default=0, help="time the loop this many times; print the best")
    args = ap.parse_args()
    os.makedirs(args.db, exist_ok=True)
    path = Path(args.db) / f"step_cost_{args.mode}.sqlite"
    go, close = raw_loop(path) if args.mode == "raw" else agent_unit_loop(path, args.mode == "engine")
    if not args.cpu:
        go(args.n)
        close()
        return 0
    best = float("inf")
    for _ in range(args.cpu):
        c0 = time.process_time()
        go(args.n)
        best = min(best, time.process_time() - c0)
    close()
    print(json.dumps({"mode": args.mode, "n": args.n, "cpu_us_per_step": round(best / args.n * 1e6, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
