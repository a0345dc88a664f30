"""LangGraph + SqliteSaver (sync, file DB): checkpointed nodes/s and runs/s.

LangGraph's persistence layer checkpoints graph state after every super-step,
so a linear chain of N no-op nodes gives the per-step checkpoint cost ("steps"),
and M one-node graphs on distinct thread_ids give the per-run cost ("runs").
Only invoke() is timed; graph construction and compile() are excluded.

Caveat on the chain: each checkpoint stores a version for every channel of the
graph, so with N distinct nodes a checkpoint grows O(N) (about 290 KB at
N=2000) and the run is O(N^2) in bytes. --shape loop runs one node N times
through a conditional self-edge instead (constant-size checkpoints), which is
how agent loops are usually written in LangGraph.

We invoke with durability="sync" by default, so each checkpoint is committed
before the next node starts, which is the guarantee a durable-execution engine
gives; "async" (LangGraph's default) overlaps the write with the next node.

SqliteSaver.setup() itself runs "PRAGMA journal_mode=WAL" and sets nothing
else, so synchronous is SQLite's compiled default (FULL) unless we set it. We
own the sqlite3 connection handed to SqliteSaver, so --synchronous is applied
on it directly, then read back and reported.

Usage: python langgraph_bench.py --workload steps|runs --n N --synchronous normal|full|default
       [--durability sync|async] [--shape chain|loop] --db DIR
Prints one JSON object on its last stdout line.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

WARMUP_STEPS = 20
WARMUP_RUNS = 5


class State(TypedDict):
    count: int


def increment(state: State) -> dict[str, int]:
    return {"count": state["count"] + 1}


def build_chain(n: int, saver: SqliteSaver) -> Any:
    """A linear graph START -> n0 -> n1 -> ... -> n{n-1} -> END."""
    builder = StateGraph(State)
    prev = START
    for i in range(n):
        name = f"n{i}"
        builder.add_node(name, increment)
        builder.add_edge(prev, name)
        prev = name
    builder.add_edge(prev, END)
    return builder.compile(checkpointer=saver)


def build_loop(n: int, saver: SqliteSaver) -> Any:
    """One node that loops on itself n times (how agent loops are usually built)."""
    builder = StateGraph(State)
    builder.add_node("step", increment)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda s: END if s["count"] >= n else "step")
    return builder.compile(checkpointer=saver)


def read_pragmas(conn: sqlite3.Connection) -> dict[str, Any]:
    sync_names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return {
        "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
        "synchronous": sync_names.get(conn.execute("PRAGMA synchronous").fetchone()[0]),
        "busy_timeout": conn.execute("PRAGMA busy_timeout").fetchone()[0],
        "sqlite_version": sqlite3.sqlite_version,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=["steps", "runs"], required=True)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument(
        "--synchronous",
        choices=["normal", "full", "default"],
        default="normal",
        help="'default' leaves SqliteSaver's own setting untouched",
    )
    ap.add_argument("--durability", choices=["sync", "async"], default="sync")
    ap.add_argument(
        "--shape",
        choices=["chain", "loop"],
        default="chain",
        help="steps workload: N distinct nodes in a chain, or one node looping N times",
    )
    ap.add_argument("--db", default=".", help="directory for the checkpoint database file")
    args = ap.parse_args()

    os.makedirs(args.db, exist_ok=True)
    path = os.path.join(args.db, "langgraph.sqlite")
    for suffix in ("", "-wal", "-shm", "-journal"):  # start from a fresh file
        if os.path.exists(path + suffix):
            os.remove(path + suffix)

    # Same connection settings as SqliteSaver.from_conn_string().
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()  # creates tables, sets WAL
    if args.synchronous != "default":
        conn.execute(f"PRAGMA synchronous={args.synchronous.upper()}")

    def invoke(graph: Any, thread_id: str, limit: int) -> dict[str, Any]:
        config = {
            "configurable": {"thread_id": thread_id},
            "recursion_limit": limit + 10,
        }
        return graph.invoke({"count": 0}, config, durability=args.durability)

    timed: Callable[[], None]
    compile_t0 = time.perf_counter()
    if args.workload == "steps":
        build = build_chain if args.shape == "chain" else build_loop
        warm, graph = build(WARMUP_STEPS, saver), build(args.n, saver)
        compile_seconds = time.perf_counter() - compile_t0
        invoke(warm, "warmup", WARMUP_STEPS)

        def timed() -> None:
            out = invoke(graph, "measured", args.n)
            if out["count"] != args.n:
                raise RuntimeError(f"graph returned count={out['count']}, expected {args.n}")

    else:
        graph = build_chain(1, saver)
        compile_seconds = time.perf_counter() - compile_t0
        for i in range(WARMUP_RUNS):
            invoke(graph, f"warmup-{i}", 1)

        def timed() -> None:
            for i in range(args.n):
                invoke(graph, f"measured-{i}", 1)

    t0 = time.perf_counter()
    timed()
    seconds = time.perf_counter() - t0

    checkpoints = conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id LIKE 'measured%'").fetchone()[0]
    writes = conn.execute("SELECT count(*) FROM writes WHERE thread_id LIKE 'measured%'").fetchone()[0]
    result = {
        "system": "langgraph",
        "version": version("langgraph"),
        "checkpoint_sqlite_version": version("langgraph-checkpoint-sqlite"),
        "workload": args.workload,
        "n": args.n,
        "synchronous": args.synchronous,
        "durability": args.durability,
        "shape": args.shape if args.workload == "steps" else "single-node",
        "actual_pragmas": read_pragmas(conn),
        "checkpoint_rows": checkpoints,
        "write_rows": writes,
        "compile_seconds_excluded": round(compile_seconds, 3),
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
        print(f"error: langgraph benchmark failed: {exc!r}", file=sys.stderr)
        sys.exit(1)
