"""agent-unit on its SQLite store: journaled steps/s, one-step runs/s, and a 1,000-step replay.

Same shape as the peer scripts in ``peers/`` so ``run.py`` can put them side by side:
``--workload steps|runs|replay --n N --synchronous normal|full --db DIR``, one JSON object on
the last stdout line, only the measured part timed with ``time.perf_counter()``, a short
warm-up (20 steps / 5 runs / a 20-step replay) first.

- ``steps``: one run of an agent awaiting N sequential no-op ``run.step("s", ...)`` calls,
  timed from ``engine.start(..., wait=True)`` to the run completing. A second, untimed run
  of the same size is traced (``sqlite3`` ``set_trace_callback`` on the store's connection)
  to count statements and COMMITs, so the trace callback never slows the timed run.
- ``runs``: N sequential runs of a one-step agent, each awaited to completion.
- ``replay``: a run journals N steps then parks on ``run.interrupt(...)``; a NEW engine and
  store over the same file (what a restarted process sees) resumes it. We time
  ``engine.resume(run_id, answer, wait=True)`` and count, during it, the SQL statements, the
  ones that read the journal table, the commits, and the calls made on the store object.
- ``append``: ``SQLiteStore.append`` called N times with exactly one step's write set (a
  journal entry, STEP_STARTED and STEP_FINISHED), no engine: the floor under ``run.step`` for
  this schema, so ``steps`` minus ``append`` is what the engine's Python costs per step. It
  also counts the WAL pages one such commit writes, next to a raw one-insert commit.

Beside the wall-clock rate, ``cpu_us_per_step`` (``cpu_us_per_run``) is the process time of the
timed part per step (per run), every thread's (sync steps' worker threads, the checkpointer): what
a faster disk changes little, so a slower runtime is told apart from a faster disk.

``--profile`` (steps only) adds a cProfile of one more, untimed, N-step run to the JSON.
``--step-fn sync`` (steps only) makes the no-op a sync function, which agent-unit runs in a
worker thread: the row shows what that thread hop costs.

Usage: python agent_unit_bench.py --workload steps|runs|replay|append --n N --synchronous normal|full --db DIR
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from agent_unit import Run, RunEngine, RunRecord, RunStatus, define_agent
from agent_unit.runtime import JournalEntry
from agent_unit.stores.sqlite import SQLiteStore

WARMUP_STEPS = 20
WARMUP_RUNS = 5
PAGE_SAMPLE = 200  # commits over which WAL pages per commit are counted (untimed)
PROFILE_TOP = 15

# The store methods a resume may call; each is wrapped on the instance to count round trips.
STORE_METHODS = (
    "create_run",
    "load_run",
    "save_run",
    "append",
    "renew_lease",
    "load_journal",
    "read_events",
    "list_runs",
    "due_runs",
    "delete_run",
    "get_state",
    "set_state",
    "delete_state",
)


async def noop() -> int:
    """The step function: an async no-op, as steps in async agent code are written."""
    return 1


def sync_noop() -> int:
    """A sync no-op: agent-unit runs sync step functions in a worker thread (as FastAPI does)."""
    return 1


@define_agent
async def steps(n: int, run: Run) -> int:
    """N sequential no-op steps: the per-step journaling cost and nothing else."""
    total = 0
    for _ in range(n):
        total += await run.step("s", noop)
    return total


@define_agent
async def sync_steps(n: int, run: Run) -> int:
    """N sequential sync no-op steps: the journaling cost plus a worker-thread hop each."""
    total = 0
    for _ in range(n):
        total += await run.step("s", sync_noop)
    return total


@define_agent
async def one_step(i: int, run: Run) -> int:
    """A run with a single no-op step: the per-run cost (create, claim, journal, finish)."""
    return await run.step("s", noop)


@define_agent
async def replayed(n: int, run: Run) -> int:
    """N journaled steps, then a park; after the resume, the steps replay from the journal."""
    total = 0
    for _ in range(n):
        total += await run.step("s", noop)
    answer = await run.interrupt("continue", answer=int)
    return total + answer


AGENTS = {"steps": steps, "sync_steps": sync_steps, "one_step": one_step, "replayed": replayed}


class Trace:
    """The SQL statements a connection executes inside ``with`` (a ``set_trace_callback``)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.statements: list[str] = []
        self._db = db

    def __enter__(self) -> Trace:
        self._db.set_trace_callback(self.statements.append)
        return self

    def __exit__(self, *exc: object) -> None:
        self._db.set_trace_callback(None)

    @property
    def commits(self) -> int:
        return sum(1 for sql in self.statements if sql.strip().upper() == "COMMIT")

    @property
    def journal_reads(self) -> int:
        return sum(1 for sql in self.statements if sql.lstrip().upper().startswith("SELECT") and " journal " in sql)


class WalPages:
    """WAL frames (pages) written inside ``with``; no checkpoint runs meanwhile, so none are lost.

    Pages per commit is what a commit physically costs at ``synchronous=NORMAL`` (no fsync):
    every page is a frame appended to the WAL and later copied back by a checkpoint. The store's
    background checkpoints (a worker thread at NORMAL) and the writer's autocheckpoint are
    paused for the sample, then put back as they were.
    """

    def __init__(self, db: sqlite3.Connection, store: SQLiteStore | None = None) -> None:
        self._db = db
        self._store = store
        self.pages = 0

    def __enter__(self) -> WalPages:
        if self._store is not None:
            self._paused, self._store._checkpoints = self._store._checkpoints, None
        self._autocheckpoint = self._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.execute("PRAGMA wal_autocheckpoint = 0")
        return self

    def __exit__(self, *exc: object) -> None:
        self.pages = self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
        self._db.execute(f"PRAGMA wal_autocheckpoint = {int(self._autocheckpoint)}")
        if self._store is not None:
            self._store._checkpoints = self._paused


def count_store_calls(store: SQLiteStore) -> Counter[str]:
    """Wrap the store's methods on the instance (the class, which the Protocol check sees, is untouched)."""
    calls: Counter[str] = Counter()

    def wrap(name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return await method(*args, **kwargs)

        return counted

    for name in STORE_METHODS:
        setattr(store, name, wrap(name, getattr(store, name)))
    return calls


def fresh(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def pragmas(db: sqlite3.Connection) -> dict[str, Any]:
    sync_names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return {
        "journal_mode": db.execute("PRAGMA journal_mode").fetchone()[0],
        "synchronous": sync_names.get(db.execute("PRAGMA synchronous").fetchone()[0]),
        "busy_timeout": db.execute("PRAGMA busy_timeout").fetchone()[0],
        "sqlite_version": sqlite3.sqlite_version,
    }


def check(record: RunRecord, expected: Any) -> None:
    if record.status != RunStatus.completed or record.output != expected:
        raise RuntimeError(f"run {record.id} ended {record.status.value} with {record.output!r}, expected {expected!r}")


def short_path(filename: str) -> str:
    """A profile entry's file without the machine's prefix: from the package down, or the last two parts."""
    parts = Path(filename).parts
    for anchor in ("agent_unit", "bench"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor) :])
    return "/".join(parts[-2:])


def summarize(profile: cProfile.Profile) -> dict[str, Any]:
    """Own time (tottime) by function and by kind of work, as shares of the profiled total."""
    stats: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in stats.values()) or 1.0
    kinds: Counter[str] = Counter()
    rows = []
    for (filename, line, name), (_, calls, own, *_rest) in stats.items():
        where = name if filename == "~" else f"{short_path(filename)}:{line}({name})"
        if filename == "~" and "sqlite3" in name:
            kind = "sqlite3 (C: execute, executemany, fetchone)"
        elif "json" in Path(filename).parts:
            kind = "json encode/decode"
        elif "agent_unit" in Path(filename).parts:
            kind = "agent_unit (Python)"
        else:
            kind = "other (asyncio, contextlib, inspect, builtins, bench agent)"
        kinds[kind] += own
        rows.append((own, calls, where))
    rows.sort(reverse=True)
    return {
        "profiled_seconds": round(total, 4),
        "by_kind": {kind: round(own / total, 4) for kind, own in kinds.most_common()},
        "top": [{"function": where, "calls": calls, "share": round(own / total, 4)} for own, calls, where in rows][
            :PROFILE_TOP
        ],
    }


async def bench_steps(path: Path, n: int, synchronous: str, profile: bool, agent: str = "steps") -> dict[str, Any]:
    store = SQLiteStore(path, synchronous=synchronous)
    engine = RunEngine(AGENTS, store)
    try:
        check(await engine.start(agent, WARMUP_STEPS, wait=True), WARMUP_STEPS)
        t0, c0 = time.perf_counter(), time.process_time()
        record = await engine.start(agent, n, wait=True)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        check(record, n)
        journaled = store._db.execute("SELECT count(*) FROM journal WHERE run_id = ?", (record.id,)).fetchone()[0]
        if journaled != n:
            raise RuntimeError(f"expected {n} journal entries, found {journaled}")
        with Trace(store._db) as trace:  # untimed: the same run again, traced
            check(await engine.start(agent, n, wait=True), n)
        with WalPages(store._db, store) as wal:
            check(await engine.start(agent, PAGE_SAMPLE, wait=True), PAGE_SAMPLE)
        result: dict[str, Any] = {
            "seconds": seconds,
            "per_sec": n / seconds,
            "us_per_step": seconds / n * 1e6,
            "cpu_us_per_step": cpu / n * 1e6,
            "commits": trace.commits,
            "commits_per_step": trace.commits / n,
            "statements_per_step": len(trace.statements) / n,
            "wal_pages_per_step": wal.pages / PAGE_SAMPLE,
            "actual_pragmas": pragmas(store._db),
        }
        if profile:
            profiler = cProfile.Profile()
            profiler.enable()
            check(await engine.start(agent, n, wait=True), n)
            profiler.disable()
            result["profile"] = summarize(profiler)
        return result
    finally:
        await engine.aclose()
        await store.close()


async def bench_runs(path: Path, n: int, synchronous: str) -> dict[str, Any]:
    store = SQLiteStore(path, synchronous=synchronous)
    engine = RunEngine(AGENTS, store)
    try:
        for i in range(WARMUP_RUNS):
            check(await engine.start("one_step", i, wait=True), 1)
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(n):
            record = await engine.start("one_step", i, wait=True)
            if record.status != RunStatus.completed:
                raise RuntimeError(f"run {record.id} ended {record.status.value}")
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        with Trace(store._db) as trace:  # untimed: one more run, traced
            check(await engine.start("one_step", 7, wait=True), 1)
        return {
            "seconds": seconds,
            "per_sec": n / seconds,
            "cpu_us_per_run": cpu / n * 1e6,
            "commits_per_run": trace.commits,
            "statements_per_run": len(trace.statements),
            "actual_pragmas": pragmas(store._db),
        }
    finally:
        await engine.aclose()
        await store.close()


async def park(path: Path, synchronous: str, sizes: tuple[int, ...]) -> list[str]:
    """Start runs that journal ``sizes`` steps and park on an interrupt, then close their engine."""
    store = SQLiteStore(path, synchronous=synchronous)
    engine = RunEngine(AGENTS, store)
    try:
        run_ids = []
        for size in sizes:
            record = await engine.start("replayed", size, wait=True)
            if record.status != RunStatus.interrupted:
                raise RuntimeError(f"run {record.id} ended {record.status.value}, expected interrupted")
            run_ids.append(record.id)
        return run_ids
    finally:
        await engine.aclose()
        await store.close()


async def bench_replay(path: Path, n: int, synchronous: str) -> dict[str, Any]:
    warm_id, run_id = await park(path, synchronous, (WARMUP_STEPS, n))
    store = SQLiteStore(path, synchronous=synchronous)  # a restarted process's view: new engine, new connection
    engine = RunEngine(AGENTS, store)
    try:
        check(await engine.resume(warm_id, 1, wait=True), WARMUP_STEPS + 1)
        calls = count_store_calls(store)
        with Trace(store._db) as trace:
            t0 = time.perf_counter()
            record = await engine.resume(run_id, 1, wait=True)
            seconds = time.perf_counter() - t0
        check(record, n + 1)
        return {
            "seconds": seconds,
            "per_sec": n / seconds,
            "ms": seconds * 1000,
            "statements": len(trace.statements),
            "journal_reads": trace.journal_reads,
            "commits": trace.commits,
            "store_calls": dict(calls),
            "store_round_trips": sum(calls.values()),
            "sql": trace.statements,
            "actual_pragmas": pragmas(store._db),
        }
    finally:
        await engine.aclose()
        await store.close()


def raw_pages_per_commit(path: Path, synchronous: str) -> float:
    """WAL pages of the raw peer's commit (one INSERT into a rowid table with a text primary key)."""
    fresh(path)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        db.execute(
            "CREATE TABLE steps (run_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,"
            " PRIMARY KEY (run_id, key))"
        )
        with WalPages(db) as wal:
            for i in range(PAGE_SAMPLE):
                db.execute("BEGIN IMMEDIATE")
                db.execute("INSERT INTO steps VALUES (?, ?, ?)", ("measured", f"step-{i}", json.dumps(i)))
                db.execute("COMMIT")
        return wal.pages / PAGE_SAMPLE
    finally:
        db.close()


async def bench_append(path: Path, n: int, synchronous: str) -> dict[str, Any]:
    store = SQLiteStore(path, synchronous=synchronous)
    try:
        now = time.time()
        moment = datetime.now(UTC)
        record = RunRecord(
            id="run_append",
            agent="steps",
            thread_id="thread_append",
            status=RunStatus.running,
            input=n,
            created_at=moment,
            updated_at=moment,
            version=1,
            lease_owner="bench",
            lease_expires=now + 3600,
            due_at=now + 3600,
        )
        await store.create_run(record)
        stamp = int(now * 1000)
        started = json.dumps({"type": "STEP_STARTED", "stepName": "s", "timestamp": stamp}, separators=(",", ":"))
        finished = json.dumps({"type": "STEP_FINISHED", "stepName": "s", "timestamp": stamp}, separators=(",", ":"))

        async def write(first: int, count: int) -> None:
            for i in range(first, first + count):
                entry = JournalEntry(f"step:s#{i}", json.dumps(i))
                await store.append(record.id, owner="bench", journal=(entry,), events=(started, finished))

        await write(0, WARMUP_STEPS)
        t0, c0 = time.perf_counter(), time.process_time()
        await write(WARMUP_STEPS, n)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        with Trace(store._db) as trace:
            await write(WARMUP_STEPS + n, 1)
        with WalPages(store._db, store) as wal:
            await write(WARMUP_STEPS + n + 1, PAGE_SAMPLE)
        return {
            "seconds": seconds,
            "per_sec": n / seconds,
            "us_per_step": seconds / n * 1e6,
            "cpu_us_per_step": cpu / n * 1e6,
            "statements_per_step": len(trace.statements),
            "sql": trace.statements,
            "wal_pages_per_commit": wal.pages / PAGE_SAMPLE,
            "raw_wal_pages_per_commit": raw_pages_per_commit(path.with_name("raw_pages.sqlite"), synchronous),
            "actual_pragmas": pragmas(store._db),
        }
    finally:
        await store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=["steps", "runs", "replay", "append"], required=True)
    ap.add_argument("--n", type=int, default=2000, help="steps, runs, journaled steps to replay, or appends")
    ap.add_argument("--synchronous", choices=["normal", "full"], default="normal")
    ap.add_argument("--db", default=".", help="directory for the database file")
    ap.add_argument("--profile", action="store_true", help="steps: add a cProfile of one more N-step run")
    ap.add_argument(
        "--step-fn", choices=["async", "sync"], default="async", help="steps: an async no-op, or a sync one (thread)"
    )
    args = ap.parse_args()

    os.makedirs(args.db, exist_ok=True)
    path = Path(args.db) / f"agent_unit_{args.workload}.sqlite"
    fresh(path)
    if args.workload == "steps":
        agent = "steps" if args.step_fn == "async" else "sync_steps"
        measured = asyncio.run(bench_steps(path, args.n, args.synchronous, args.profile, agent))
    elif args.workload == "runs":
        measured = asyncio.run(bench_runs(path, args.n, args.synchronous))
    elif args.workload == "replay":
        measured = asyncio.run(bench_replay(path, args.n, args.synchronous))
    else:
        measured = asyncio.run(bench_append(path, args.n, args.synchronous))
    result = {
        "system": "agent-unit",
        "version": version("agent-unit"),
        "workload": args.workload,
        "n": args.n,
        "synchronous": args.synchronous,
        "step_fn": args.step_fn,
        **measured,
    }
    result["seconds"] = round(result["seconds"], 6)
    result["per_sec"] = round(result["per_sec"], 1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # noqa: BLE001  # one clear line on stderr, non-zero exit
        print(f"error: agent-unit benchmark failed: {exc!r}", file=sys.stderr)
        sys.exit(1)
