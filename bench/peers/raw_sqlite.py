"""Physical limit for a durable step on SQLite: one INSERT + COMMIT per step.

A durable-execution engine must persist each step's result before moving on,
so one committed transaction per step is the floor any SQLite-backed engine
pays. This loop does exactly that and nothing else (WAL mode,
busy_timeout=5000, explicit BEGIN IMMEDIATE / COMMIT), giving the upper bound
that the other peers (and agent-unit) can be compared against.

Usage: python raw_sqlite.py --workload steps --n 2000 --synchronous normal --db DIR
Prints one JSON object on its last stdout line.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
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


def run_steps(conn: sqlite3.Connection, run_id: str, n: int) -> None:
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO steps (run_id, key, value) VALUES (?, ?, ?)",
            (run_id, f"step-{i}", json.dumps(i)),
        )
        conn.execute("COMMIT")


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
    args = ap.parse_args()

    os.makedirs(args.db, exist_ok=True)
    path = os.path.join(args.db, "raw_sqlite.sqlite")
    for suffix in ("", "-wal", "-shm", "-journal"):  # start from a fresh file
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    conn = open_db(path, args.synchronous)

    run_steps(conn, "warmup", WARMUP_STEPS)
    t0 = time.perf_counter()
    run_steps(conn, "measured", args.n)
    seconds = time.perf_counter() - t0

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
        "actual_pragmas": pragmas(conn),
        "seconds": round(seconds, 6),
        "per_sec": round(args.n / seconds, 1),
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
