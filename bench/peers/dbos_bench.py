"""DBOS Transact (Python) on its SQLite system database: steps/s and runs/s.

DBOS is the closest peer to agent-unit: a library (no server) that checkpoints
every @DBOS.step() result into a system database before the workflow moves on.
"steps" runs one workflow of N sequential no-op steps (per-step checkpoint
cost); "runs" runs M workflows of one no-op step each, sequentially (per-run
overhead: workflow status insert/update plus the step row).

DBOS creates its own SQLAlchemy engine and sets only busy_timeout and
foreign_keys on each connection; it leaves journal_mode and synchronous at
SQLite's defaults. To apply --synchronous (and optionally --journal-mode wal)
we register a class-level SQLAlchemy "connect" listener before DBOS builds its
engine, so every DBOS connection gets the pragmas. The pragmas are then read
back on a connection from DBOS's own pool and reported.

Usage: python dbos_bench.py --workload steps|runs --n N --synchronous normal|full|default
       [--journal-mode default|wal] --db DIR
Prints one JSON object on its last stdout line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from importlib.metadata import version
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, SetWorkflowID

WARMUP_STEPS = 20
WARMUP_RUNS = 5


@DBOS.step()
def noop_step(i: int) -> int:
    return i


@DBOS.workflow()
def steps_workflow(n: int) -> int:
    total = 0
    for i in range(n):
        total += noop_step(i)
    return total


@DBOS.workflow()
def one_step_workflow(i: int) -> int:
    return noop_step(i)


def install_pragmas(synchronous: str, journal_mode: str) -> None:
    """Apply pragmas to every SQLite connection any SQLAlchemy engine opens."""

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        if not type(dbapi_conn).__module__.startswith("sqlite3"):
            return
        if journal_mode == "wal":
            dbapi_conn.execute("PRAGMA journal_mode=WAL")
        if synchronous != "default":
            dbapi_conn.execute(f"PRAGMA synchronous={synchronous.upper()}")

    sa.event.listen(sa.engine.Engine, "connect", on_connect)


def read_pragmas(engine: sa.Engine) -> dict[str, Any]:
    sync_names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    with engine.connect() as conn:

        def q(pragma: str) -> Any:
            return conn.exec_driver_sql(f"PRAGMA {pragma}").scalar()

        return {
            "journal_mode": q("journal_mode"),
            "synchronous": sync_names.get(q("synchronous")),
            "busy_timeout": q("busy_timeout"),
            "foreign_keys": q("foreign_keys"),
            "sqlite_version": conn.exec_driver_sql("SELECT sqlite_version()").scalar(),
        }


def count_step_rows(engine: sa.Engine, prefix: str) -> int:
    with engine.connect() as conn:
        count = conn.exec_driver_sql(
            "SELECT count(*) FROM operation_outputs WHERE workflow_uuid LIKE ?",
            (prefix + "%",),
        ).scalar()
        return int(count or 0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=["steps", "runs"], required=True)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument(
        "--synchronous",
        choices=["normal", "full", "default"],
        default="normal",
        help="'default' leaves DBOS's own setting untouched",
    )
    ap.add_argument(
        "--journal-mode",
        choices=["default", "wal"],
        default="default",
        help="'default' keeps what DBOS uses (SQLite's rollback journal); 'wal' forces WAL",
    )
    ap.add_argument("--db", default=".", help="directory for the system database file")
    args = ap.parse_args()

    os.makedirs(args.db, exist_ok=True)
    path = os.path.abspath(os.path.join(args.db, "dbos_sys.sqlite"))
    for suffix in ("", "-wal", "-shm", "-journal"):  # start from a fresh file
        if os.path.exists(path + suffix):
            os.remove(path + suffix)

    install_pragmas(args.synchronous, args.journal_mode)
    dbos = DBOS(
        config={
            "name": "dbos-bench",
            "system_database_url": f"sqlite:///{path}",
            "log_level": "WARNING",
        }
    )
    DBOS.launch()
    try:
        engine: sa.Engine = dbos._sys_db.engine  # internal attribute, read-only use
        if args.workload == "steps":
            with SetWorkflowID("warmup-steps"):
                steps_workflow(WARMUP_STEPS)
            t0 = time.perf_counter()
            with SetWorkflowID("measured-steps"):
                steps_workflow(args.n)
            seconds = time.perf_counter() - t0
        else:
            for i in range(WARMUP_RUNS):
                with SetWorkflowID(f"warmup-run-{i}"):
                    one_step_workflow(i)
            t0 = time.perf_counter()
            for i in range(args.n):
                with SetWorkflowID(f"measured-run-{i}"):
                    one_step_workflow(i)
            seconds = time.perf_counter() - t0

        rows = count_step_rows(engine, "measured-")
        if rows != args.n:
            print(
                f"error: expected {args.n} step checkpoints, found {rows}",
                file=sys.stderr,
            )
            return 1
        result = {
            "system": "dbos",
            "version": version("dbos"),
            "workload": args.workload,
            "n": args.n,
            "synchronous": args.synchronous,
            "journal_mode_requested": args.journal_mode,
            "actual_pragmas": read_pragmas(engine),
            "step_rows_checkpointed": rows,
            "seconds": round(seconds, 6),
            "per_sec": round(args.n / seconds, 1),
        }
    finally:
        DBOS.destroy()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # noqa: BLE001  # one clear line on stderr, non-zero exit
        print(f"error: dbos benchmark failed: {exc!r}", file=sys.stderr)
        sys.exit(1)
