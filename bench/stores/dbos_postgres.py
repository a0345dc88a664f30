"""DBOS Transact on PostgreSQL: journaled steps/s and one-step workflows/s (runs on .venv-bench).

    .venv-bench/bin/python bench/stores/dbos_postgres.py --database-url URL --workload steps|runs --n N [--go FILE]

DBOS checkpoints every ``@DBOS.step()`` result in its system database before the workflow
moves on; here that database is the same PostgreSQL server agent-unit's Postgres store uses
in the comparison. ``--go FILE`` waits for the file before the timed part (several processes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from importlib.metadata import version

from dbos import DBOS, SetWorkflowID

WARMUP = 20


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--workload", choices=["steps", "runs"], required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--go")
    args = parser.parse_args()
    DBOS(config={"name": "dbos-bench", "system_database_url": args.database_url, "log_level": "WARNING"})
    DBOS.launch()
    tag = uuid.uuid4().hex[:8]
    try:
        if args.workload == "steps":
            with SetWorkflowID(f"warmup-{tag}"):
                steps_workflow(WARMUP)
        else:
            for i in range(WARMUP):
                with SetWorkflowID(f"warmup-{tag}-{i}"):
                    one_step_workflow(i)
        if args.go:
            while not os.path.exists(args.go):
                time.sleep(0.001)
        began, t0 = time.time(), time.perf_counter()
        if args.workload == "steps":
            with SetWorkflowID(f"measured-{tag}"):
                assert steps_workflow(args.n) == sum(range(args.n))
        else:
            for i in range(args.n):
                with SetWorkflowID(f"measured-{tag}-{i}"):
                    assert one_step_workflow(i) == i
        seconds = time.perf_counter() - t0
        ended = time.time()
    finally:
        DBOS.destroy()
    result = {
        "system": "dbos",
        "version": version("dbos"),
        "workload": args.workload,
        "n": args.n,
        "seconds": round(seconds, 6),
        "per_sec": round(args.n / seconds, 1),
        "began": began,
        "ended": ended,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
