"""Physical limit for a durable step on SQLite: one INSERT + COMMIT per step.

A durable-execution engine must persist each step's result before moving on,
so one committed transaction per step is the floor any SQLite-backed engine
pays. This loop does exactly that and nothing else (WAL mode,
busy_timeout=5000, explicit BEGIN IMMEDIATE / COMMIT), giving the upper bound
that the other peers (and agent-unit) can be compared against.

``--checkpoint thread`` moves the WAL checkpoints to a worker thread the way agent-unit's
SQLite store does at NORMAL (a PASSIVE checkpoint every 256 commits on a connection of its own,
the writer's autocheckpoint raised to 8,000 pages as the bound): the same floor with the
checkpoints off the writer's thread, for comparison; the default ``inline`` is SQLite's own.

``cpu_us_per_step`` is the process (CPU) time of the measured loop per step, every thread's: what
a faster or slower disk changes little, beside the wall-clock rate that a disk's syncs bound.

Usage: python raw_sqlite.py --workload steps --n 2000 --synchronous normal --db DIR [--checkpoint inline|thread]
Prints one JSON object on its last stdout line.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import threading
import time

WARMUP_STEPS = 20


def open_db(path: str, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=5000")
    conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS steps ("
        "run_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
        "PRIMARY KEY (run_id, key))"
    )
    return conn


class Checkpoints:
    """PASSIVE checkpoints on a thread and connection of their own, asked for every 256 commits."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._wanted = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._work, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None)
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._stop:
                break
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        conn.close()

    def request(self) -> None:
        self._wanted.set()

    def close(self) -> None:
        self._stop = True
        self._wanted.set()
        self._thread.join()


def run_steps(conn: sqlite3.Connection, run_id: str, n: int, checkpoints: Checkpoints | None = None) -> None:
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO steps (run_id, key, value) VALUES (?, ?, ?)",
            (run_id, f"step-{i}", json.dumps(i)),
        )
        conn.execute("COMMIT")
        if checkpoints is not None and i % 256 == 255:
            checkpoints.request()


def pragmas(conn: sqlite3.Connection) -> dict[str, object]:
    sync_names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return {
        "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
        "synchronous": sync_names.get(conn.execute("PRAGMA synchronous").fetchone()[0]),
        "busy_timeout": conn.execute("PRAGMA busy_timeout").fetchone()[0],
        "sqlite_version": sqlite3.sqlite_version,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=["steps"], default="steps")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--synchronous", choices=["normal", "full"], default="normal")
    ap.add_argument("--db", default=".", help="directory for the database file")
    ap.add_argument("--checkpoint", choices=["inline", "thread"], default="inline")
    args = ap.parse_args()

    os.makedirs(args.db, exist_ok=True)
    path = os.path.join(args.db, "raw_sqlite.sqlite")
    for suffix in ("", "-wal", "-shm", "-journal"):  # start from a fresh file
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    conn = open_db(path, args.synchronous)
    checkpoints = None
    if args.checkpoint == "thread":
        conn.execute("PRAGMA wal_autocheckpoint = 8000")
        checkpoints = Checkpoints(path)

    run_steps(conn, "warmup", WARMUP_STEPS, checkpoints)
    t0, c0 = time.perf_counter(), time.process_time()
    run_steps(conn, "measured", args.n, checkpoints)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    if checkpoints is not None:
        checkpoints.close()

    written = conn.execute("SELECT count(*) FROM steps WHERE run_id='measured'").fetchone()[0]
    if written != args.n:
        print(f"error: expected {args.n} rows, found {written}", file=sys.stderr)
        return 1
    result = {
        "system": "raw-sqlite",
        "version": sqlite3.sqlite_version,
        "workload": args.workload,
        "n": args.n,
        "synchronous": args.synchronous,
        "checkpoint": args.checkpoint,
        "actual_pragmas": pragmas(conn),
        "seconds": round(seconds, 6),
        "per_sec": round(args.n / seconds, 1),
        "cpu_us_per_step": round(cpu / args.n * 1e6, 2),
    }
    conn.close()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # noqa: BLE001  # one clear line on stderr, non-zero exit
        print(f"error: raw sqlite benchmark failed: {exc!r}", file=sys.stderr)
        sys.exit(1)
